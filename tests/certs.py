"""Throwaway PKI for the TLS tests: generated at run time with ``cryptography``."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from distributed.security import Security


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path: str, key: ec.EllipticCurvePrivateKey | None, cert: x509.Certificate) -> str:
    with open(path, "wb") as f:
        if key is not None:
            f.write(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    now = dt.datetime.now(dt.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate, cn: str, expired: bool = False
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _key()
    now = dt.datetime.now(dt.timezone.utc)
    start, end = (now - dt.timedelta(days=10), now - dt.timedelta(days=5)) if expired else (
        now - dt.timedelta(days=1),
        now + dt.timedelta(days=30),
    )
    sans = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


@dataclass
class Certs:
    """Files of one test PKI: a CA, a leaf signed by it, an expired leaf, and a
    second, unrelated CA with its own leaf."""

    ca: str
    cert: str
    expired: str
    other_ca: str
    other_cert: str

    def security(self, cert: str | None = None, ca: str | None = None, **kw: object) -> Security:
        """A distributed Security object using ``cert`` for every role."""
        cert = cert or self.cert
        return Security(
            tls_ca_file=ca or self.ca,
            tls_client_cert=cert,
            tls_scheduler_cert=cert,
            tls_worker_cert=cert,
            require_encryption=kw.pop("require_encryption", True),
            **kw,
        )


def make_certs(directory: str) -> Certs:
    ca_key, ca = _ca("asynciocomm test CA")
    other_key, other = _ca("unrelated CA")
    leaf_key, leaf = _leaf(ca_key, ca, "asynciocomm test")
    exp_key, exp = _leaf(ca_key, ca, "expired", expired=True)
    o_key, o_leaf = _leaf(other_key, other, "stranger")
    return Certs(
        ca=_write(os.path.join(directory, "ca.pem"), None, ca),
        cert=_write(os.path.join(directory, "cert.pem"), leaf_key, leaf),
        expired=_write(os.path.join(directory, "expired.pem"), exp_key, exp),
        other_ca=_write(os.path.join(directory, "other-ca.pem"), None, other),
        other_cert=_write(os.path.join(directory, "other-cert.pem"), o_key, o_leaf),
    )
