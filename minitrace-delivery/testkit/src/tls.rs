//! Certificates made at test time, with rcgen: a CA and the server
//! certificates it issues, or a self-signed certificate that nothing
//! trusts.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A certificate authority of a test's own.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

impl TestCa {
    /// A new CA, with a new key.
    #[allow(clippy::new_without_default)]
    pub fn new() -> TestCa {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, "minitrace test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let certificate = params.self_signed(&key).unwrap();
        TestCa { pem: certificate.pem(), issuer: Issuer::new(params, key) }
    }

    /// The CA's certificate, as PEM: what a client trusts.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A server certificate for `names` (host names or IP addresses),
    /// issued by this CA.
    pub fn issue(&self, names: &[&str]) -> Identity {
        let key = KeyPair::generate().unwrap();
        let params = server_params(names);
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        Identity::new(certificate, key)
    }
}

fn server_params(names: &[&str]) -> CertificateParams {
    let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    let mut params = CertificateParams::new(names).unwrap();
    params.distinguished_name.push(DnType::CommonName, "minitrace test server");
    params
}

/// A server's certificate and key.
#[derive(Clone)]
pub struct Identity {
    certificate: CertificateDer<'static>,
    certificate_pem: String,
    key: Vec<u8>,
    key_pem: String,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").finish_non_exhaustive()
    }
}

impl Identity {
    fn new(certificate: rcgen::Certificate, key: KeyPair) -> Identity {
        Identity {
            certificate: certificate.der().clone(),
            certificate_pem: certificate.pem(),
            key: key.serialize_der(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A self-signed certificate for `names`, which no client trusts
    /// unless given it.
    pub fn self_signed(names: &[&str]) -> Identity {
        let key = KeyPair::generate().unwrap();
        let certificate = server_params(names).self_signed(&key).unwrap();
        Identity::new(certificate, key)
    }

    /// The certificate, as PEM.
    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    /// The private key, as PKCS#8 PEM.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// A rustls server configuration presenting this certificate.
    pub(crate) fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![self.certificate.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone())),
            )
            .unwrap();
        Arc::new(config)
    }
}
