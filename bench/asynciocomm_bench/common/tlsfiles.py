"""Throwaway TLS material (a CA and one certificate) made at run time."""

from __future__ import annotations

import dataclasses
import datetime
import os
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class TLSFiles:
    """Paths of a throwaway CA certificate and a cert/key signed by it."""

    ca_file: str
    cert: str
    key: str

    def security(self) -> Any:
        """A ``distributed.security.Security`` using these files for every role."""
        from distributed.security import Security

        return Security(
            tls_ca_file=self.ca_file,
            tls_scheduler_cert=self.cert, tls_scheduler_key=self.key,
            tls_worker_cert=self.cert, tls_worker_key=self.key,
            tls_client_cert=self.cert, tls_client_key=self.key,
            require_encryption=True,
        )

    def dask_config(self) -> dict[str, Any]:
        """The same settings as a nested dask config mapping (for YAML files)."""
        role = {"cert": self.cert, "key": self.key}
        return {"distributed": {"comm": {
            "require-encryption": True,
            "tls": {"ca-file": self.ca_file, "scheduler": role, "worker": role,
                    "client": role},
        }}}


def make_tls_files(directory: str | os.PathLike[str]) -> TLSFiles:
    """Write a fresh CA and a localhost certificate into ``directory``."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=7)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "asynciocomm-bench CA")])
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    san = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(ca_name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(san, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (d / "ca.pem").write_bytes(ca_cert.public_bytes(pem))
    (d / "cert.pem").write_bytes(cert.public_bytes(pem))
    (d / "key.pem").write_bytes(key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return TLSFiles(str(d / "ca.pem"), str(d / "cert.pem"), str(d / "key.pem"))
