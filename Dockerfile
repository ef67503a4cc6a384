# A small static image of redline for distributed runs (docs/distributed.md).
#   docker build -t redline:latest .
#   redline k8s --parallel 4 --image redline:latest -- run http://web/ -d 60s -c 400 | kubectl apply -f -
# Stage 1: a static (musl) release build.
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-musl -p redline \
    && mkdir -p /out/tmp \
    && chmod 1777 /out/tmp \
    && cp target/x86_64-unknown-linux-musl/release/redline /out/redline

# Stage 2: nothing but the binary and a /tmp (agents keep their live counters there).
FROM scratch
COPY --from=build /out/tmp /tmp
COPY --from=build /out/redline /usr/local/bin/redline
ENV REDLINE_DB=/tmp/redline-history.db
USER 65534:65534
EXPOSE 7070
ENTRYPOINT ["/usr/local/bin/redline"]
