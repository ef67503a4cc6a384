#!/usr/bin/env bash
# tune on a corpus of public configurations (issue 34, point 6): gathers the
# configs Debian's packages ship for nginx, Apache and lighttpd (apt-get
# download, never installed) and, when their git mirrors are given, the h5bp
# server configs and lighttpd's own examples; writes the manifest; runs
# crates/watch/examples/tune_corpus.rs on it. Needs nginx, apache2 and
# lighttpd installed (their config tests are the oracle).
#
#   OUT=/tmp/tune-corpus H5BP_NGINX=/path/repo.git H5BP_APACHE=... LIGHTTPD_SRC=... bench/tune_corpus.sh
#
# The results table goes to $OUT/results.md; docs/server-side.md has the latest.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tune-corpus}
mkdir -p "$OUT/debs" "$OUT/src"
PKGS="nginx-common nginx-extras libnginx-mod-http-lua python3-certbot-nginx mailman3-web munin
zabbix-frontend-php apache2 apache2-doc libapache2-mod-php8.2 php8.2-fpm phpmyadmin roundcube-core
cgit gitweb mediawiki nagios4-cgi sympa cacti tt-rss dokuwiki lighttpd lighttpd-mod-deflate
lighttpd-mod-openssl lighttpd-mod-webdav lighttpd-mod-authn-gssapi"
( cd "$OUT/debs" && for p in $PKGS; do ls "${p}"_*.deb >/dev/null 2>&1 || apt-get download -qq "$p" 2>/dev/null || echo "not downloaded: $p" >&2; done )
for d in "$OUT"/debs/*.deb; do
    n=$(basename "$d"); n=${n%%_*}
    [ -d "$OUT/src/deb-$n" ] || { mkdir -p "$OUT/src/deb-$n" && dpkg-deb -x "$d" "$OUT/src/deb-$n"; }
done
# git mirrors: copy the tree of HEAD
mirror() { # NAME GITDIR
    [ -n "$2" ] && [ -d "$2" ] || return 0
    rm -rf "$OUT/src/$1" && mkdir -p "$OUT/src/$1" && git --git-dir="$2" archive HEAD | tar -x -C "$OUT/src/$1"
    echo "$1 $(git --git-dir="$2" log -1 --format='%H %cs')" >> "$OUT/origins.txt"
}
: > "$OUT/origins.txt"
mirror h5bp-nginx "${H5BP_NGINX:-}"
mirror h5bp-apache "${H5BP_APACHE:-}"
mirror lighttpd-src "${LIGHTTPD_SRC:-}"
for d in "$OUT"/debs/*.deb; do echo "deb $(basename "$d")" >> "$OUT/origins.txt"; done

M="$OUT/manifest.tsv"
: > "$M"
add() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$M"; }
S="$OUT/src"
# Whole configs.
[ -f "$S/deb-nginx-common/etc/nginx/nginx.conf" ] && add nginx main "$S/deb-nginx-common/etc/nginx/nginx.conf" "Debian nginx-common"
[ -f "$S/h5bp-nginx/nginx.conf" ] && add nginx main "$S/h5bp-nginx/nginx.conf" "h5bp server-configs-nginx"
[ -f "$S/deb-lighttpd/etc/lighttpd/lighttpd.conf" ] && add lighttpd main "$S/deb-lighttpd/etc/lighttpd/lighttpd.conf" "Debian lighttpd"
for f in "$S"/lighttpd-src/doc/config/lighttpd.conf "$S"/lighttpd-src/doc/config/lighttpd.annotated.conf; do [ -f "$f" ] && add lighttpd main "$f" "lighttpd1.4 doc/config"; done
# lighttpd's own main files read include_shell output, which no config test
# here runs: a copy with each include_shell replaced by what it prints on
# Debian (the enabled conf files; a mime map) is tested as well.
for f in "$S/deb-lighttpd/etc/lighttpd/lighttpd.conf" "$S/lighttpd-src/doc/config/lighttpd.conf"; do
    [ -f "$f" ] || continue
    n="$(dirname "$f")/lighttpd-noshell.conf"
    sed -e 's|^include_shell .*include-conf-enabled.pl.*|include "conf-enabled/*.conf"|' \
        -e 's|^include_shell .*create-mime.conf.pl.*|mimetype.assign = ( ".html" => "text/html", ".css" => "text/css" )|' \
        -e 's|^include_shell .*|# (include_shell removed for the config test)|' "$f" > "$n"
    mkdir -p "$(dirname "$f")/conf-enabled"
    add lighttpd main "$n" "$(basename "$(dirname "$(dirname "$(dirname "$f")")")") lighttpd.conf, include_shell replaced"
done
[ -f "$S/deb-apache2/etc/apache2/apache2.conf" ] && add apache main "$S/deb-apache2/etc/apache2/apache2.conf" "Debian apache2"
[ -f "$S/deb-apache2-doc/usr/share/doc/apache2/examples/apache2/apache2.conf" ] && add apache main "$S/deb-apache2-doc/usr/share/doc/apache2/examples/apache2/apache2.conf" "Debian apache2-doc example"
if [ -f "$S/h5bp-apache/httpd.conf" ]; then
    # Its ServerRoot is /usr/local/apache2: point it at the copy, with Debian's modules.
    # Debian's httpd has these modules built in: their LoadModule lines are refused.
    sed -i -e "s|^ServerRoot .*|ServerRoot \"$S/h5bp-apache\"|" \
        -e "s/^LoadModule \(log_config\|logio\|unixd\|version\|watchdog\|so\)_module/# (built into Debian's httpd) &/" "$S/h5bp-apache/httpd.conf"
    ln -sfn /usr/lib/apache2/modules "$S/h5bp-apache/modules"; mkdir -p "$S/h5bp-apache/logs" "$S/h5bp-apache/conf"
    # It reads conf/mime.types as httpd's own install has it: Debian's.
    [ -f /etc/mime.types ] && ln -sfn /etc/mime.types "$S/h5bp-apache/conf/mime.types"
    add apache main "$S/h5bp-apache/httpd.conf" "h5bp server-configs-apache"
fi
# Fragments, each in the smallest whole config the server accepts it in.
find "$S" -type f \( -name '*.conf' -o -name '*nginx*' -o -name '*.htaccess' -o -name '.htaccess' -o -name '*.load' \) \
    -not -path '*/doc/apache2-doc/manual/*' -not -path '*/test/build/*' -not -name '*.md5sum' \
    -not -path '*/.github/*' -not -path '*/tmpfiles.d/*' -not -path '*/init.d/*' -not -path '*/logrotate.d/*' \
    -not -path '*/default/*' -not -path '*/ufw/*' -not -path '*/apport/*' -not -path '*/systemd/*' \
    -not -regex '.*\.\(js\|py\|vim\|yaml\|yml\|service\|pl\|md\|txt\|json\|php\)$' | sort | while read -r f; do
    case "$f" in
        */etc/nginx/nginx.conf|*/h5bp-nginx/nginx.conf|*/etc/lighttpd/lighttpd.conf|*/doc/config/lighttpd.conf|*/lighttpd-noshell.conf|*/.redline-wrap-*|*/lighttpd.annotated.conf|*/etc/apache2/apache2.conf|*/examples/apache2/apache2.conf|*/h5bp-apache/httpd.conf) continue ;;
    esac
    o=${f#"$S"/}; o=${o%%/*}
    LC_ALL=C grep -qaP '\x00' "$f" && continue
    case "$f" in
        *nginx*|*/h5bp-nginx/*|*certbot*) add nginx fragment "$f" "$o" ;;
        *lighttpd*) add lighttpd fragment "$f" "$o" ;;
        *.htaccess|*/.htaccess) add apache htaccess "$f" "$o" ;;
        *apache*|*httpd*|*/h5bp-apache/*|*/etc/apache2/*) add apache fragment "$f" "$o" ;;
    esac
done
echo "$(wc -l < "$M") configs in $M"
cargo build -q -p redline-watch --example tune_corpus
./target/debug/examples/tune_corpus "$M" "$OUT/scratch" | tee "$OUT/results.md"
