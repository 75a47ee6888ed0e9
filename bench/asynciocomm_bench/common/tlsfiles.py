"""Throwaway TLS material made at run time: one CA, and certificates it signs.

:func:`make_tls_files` writes one certificate for localhost (every process on
this host); :func:`make_host_tls` one per simulated host, each naming its own
addresses (``subjectAltName`` IP entries), as a real deployment's would.
distributed's ``Security`` turns hostname checks off and requires a certificate
signed by the CA (``verify_mode = CERT_REQUIRED``, ``check_hostname = False`` in
``distributed/security.py``), so the SAN entries are what a stricter peer would
check, not what makes the handshake pass.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
from pathlib import Path
from typing import Any

#: Validity of every certificate: from a day ago (clock skew between the
#: processes is no concern) to a week ahead (longer than any run).
VALID = (datetime.timedelta(days=-1), datetime.timedelta(days=7))


def comm_config(ca_file: str, cert: str, key: str) -> dict[str, Any]:
    """distributed's ``comm`` settings that use ``cert``/``key`` in every role, as a
    nested dask config mapping (for YAML files and ``dask.config.set``)."""
    role = {"cert": cert, "key": key}
    return {"distributed": {"comm": {
        "require-encryption": True,
        "tls": {"ca-file": ca_file, "scheduler": role, "worker": role, "client": role},
    }}}


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
        """The same settings as a nested dask config mapping."""
        return comm_config(self.ca_file, self.cert, self.key)


@dataclasses.dataclass(frozen=True)
class HostTLS:
    """The CA file and, per host, the paths of its certificate and key."""

    ca_file: str
    certs: dict[str, tuple[str, str]]

    def dask_config(self, host: str) -> dict[str, Any]:
        """The ``distributed.comm`` settings of ``host`` (every role alike)."""
        return comm_config(self.ca_file, *self.certs[host])


class _Authority:
    """A fresh CA that writes itself into a folder and signs leaf certificates."""

    def __init__(self, directory: str | os.PathLike[str], cn: str) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        self.start, self.end = now + VALID[0], now + VALID[1]
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = _name(cn)
        cert = (
            x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(self.start).not_valid_after(self.end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.ca_file = self._write("ca.pem", cert.public_bytes(_pem()))

    def _write(self, name: str, data: bytes) -> str:
        path = self.dir / name
        path.write_bytes(data)
        return str(path)

    def leaf(self, stem: str, cn: str, dns: list[str], ips: list[str]) -> tuple[str, str]:
        """A certificate for ``dns`` names and ``ips``, signed by this CA, and its
        key: written as ``<stem>cert.pem`` and ``<stem>key.pem``."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        key = ec.generate_private_key(ec.SECP256R1())
        sans = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in dict.fromkeys(ips)]
        cert = (
            x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(self.name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(self.start).not_valid_after(self.end)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(_pem(), serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        return (self._write(f"{stem}cert.pem", cert.public_bytes(_pem())),
                self._write(f"{stem}key.pem", key_pem))


def _name(cn: str) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem() -> Any:
    from cryptography.hazmat.primitives import serialization

    return serialization.Encoding.PEM


def make_tls_files(directory: str | os.PathLike[str]) -> TLSFiles:
    """Write a fresh CA and a localhost certificate into ``directory``."""
    ca = _Authority(directory, "asynciocomm-bench CA")
    cert, key = ca.leaf("", "localhost", ["localhost"], ["127.0.0.1"])
    return TLSFiles(ca.ca_file, cert, key)


def make_host_tls(directory: str | os.PathLike[str], hosts: dict[str, list[str]]) -> HostTLS:
    """Write a fresh CA and one certificate per host (valid for its addresses)."""
    ca = _Authority(directory, "asynciocomm-bench scale CA")
    return HostTLS(ca.ca_file, {host: ca.leaf(f"{host}-", f"asynciocomm-bench {host}", [], addrs)
                                for host, addrs in hosts.items()})
