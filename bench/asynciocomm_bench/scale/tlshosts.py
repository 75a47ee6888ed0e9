"""Throwaway TLS material for a cluster of hosts: one CA, one certificate per host.

Each host's certificate names its own addresses (``subjectAltName`` IP
entries), as a real deployment's would. distributed's ``Security`` turns
hostname checks off and requires a certificate signed by the CA
(``verify_mode = CERT_REQUIRED``, ``check_hostname = False`` in
``distributed/security.py``), and every process here uses it, so the SAN
entries are what a stricter peer would check, not what makes the handshake pass.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class HostTLS:
    """The CA file and, per host, the paths of its certificate and key."""

    ca_file: str
    certs: dict[str, tuple[str, str]]

    def dask_config(self, host: str) -> dict[str, Any]:
        """The ``distributed.comm`` settings of ``host`` (every role alike)."""
        cert, key = self.certs[host]
        role = {"cert": cert, "key": key}
        return {"distributed": {"comm": {
            "require-encryption": True,
            "tls": {"ca-file": self.ca_file, "scheduler": role, "worker": role,
                    "client": role},
        }}}


def make_host_tls(directory: str | Path, hosts: dict[str, list[str]]) -> HostTLS:
    """Write a fresh CA and one certificate per host (valid for its addresses)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=7)
    pem = serialization.Encoding.PEM

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder().subject_name(name("asynciocomm-bench scale CA"))
        .issuer_name(name("asynciocomm-bench scale CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    (d / "ca.pem").write_bytes(ca_cert.public_bytes(pem))
    certs: dict[str, tuple[str, str]] = {}
    for host, addrs in hosts.items():
        key = ec.generate_private_key(ec.SECP256R1())
        sans = [x509.IPAddress(ipaddress.ip_address(a)) for a in dict.fromkeys(addrs)]
        cert = (
            x509.CertificateBuilder().subject_name(name(f"asynciocomm-bench {host}"))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        cpath, kpath = d / f"{host}-cert.pem", d / f"{host}-key.pem"
        cpath.write_bytes(cert.public_bytes(pem))
        kpath.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
        certs[host] = (str(cpath), str(kpath))
    return HostTLS(str(d / "ca.pem"), certs)
