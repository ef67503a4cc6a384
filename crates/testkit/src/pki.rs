//! TLS test material: a fresh CA and a leaf certificate for `localhost` and
//! `127.0.0.1` signed by it, made with rcgen, as PEM and DER.

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::CertificateDer;

/// A CA and a leaf certificate signed by it, as PEM and DER.
pub struct Pki {
    /// The CA certificate (PEM).
    pub ca_pem: String,
    /// The leaf certificate (PEM).
    pub leaf_pem: String,
    /// The leaf's private key (PEM).
    pub key_pem: String,
    /// Leaf and CA (DER), for a rustls server.
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf's private key (PKCS#8 DER).
    pub key_der: Vec<u8>,
}

/// A fresh CA and a leaf for `localhost` and `127.0.0.1`.
pub fn pki() -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        leaf_pem: leaf.pem(),
        key_pem: leaf_key.serialize_pem(),
        chain: vec![
            CertificateDer::from(leaf.der().to_vec()),
            CertificateDer::from(ca_cert.der().to_vec()),
        ],
        key_der: leaf_key.serialize_der(),
    }
}

/// SHA-256 of the leaf's SubjectPublicKeyInfo, what Chromium's
/// `--ignore-certificate-errors-spki-list` takes (base64-encoded): QUIC in
/// Chromium trusts no test CA, only a pinned key.
pub fn leaf_spki_sha256(p: &Pki) -> [u8; 32] {
    let key = KeyPair::try_from(p.key_der.as_slice()).expect("the leaf's key");
    let spki = rcgen::PublicKeyData::subject_public_key_info(&key);
    let d = ring::digest::digest(&ring::digest::SHA256, &spki);
    d.as_ref().try_into().expect("32 bytes")
}
