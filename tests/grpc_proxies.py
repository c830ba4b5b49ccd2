"""A secured Temporal for tests: Debian's nginx terminating TLS in front of a dev server, once requiring a client
certificate (mutual TLS) and once an API key in the `authorization` header, as Temporal Cloud does, each key for
its own namespace: the gateway's, and a service team's. The certificates are made here, for the test: a CA, the
proxy's certificate for 127.0.0.1, and a client's."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from devstack.ports import free_port, wait_for_port
from devstack.search_team import SERVICE_NAMESPACE

# The gateway's key, for its namespace; and the search team's, for the team's namespace alone.
API_KEY = "test-api-key-for-the-proxy"
GATEWAY_NAMESPACE = "default"
TEAM_API_KEY = "test-api-key-of-the-search-team"
NAMESPACE_OF_KEY = {API_KEY: GATEWAY_NAMESPACE, TEAM_API_KEY: SERVICE_NAMESPACE}
# The proxy's refusal of a key outside its namespace, as gRPC's PERMISSION_DENIED.
REFUSED = "this API key may not make this call"
SERVER_NAME = "localhost"


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_certificates(directory: Path) -> Certificates:
    """A CA and two leaves it signs. Each leaf carries an extended key usage, which makes it X.509 v3: the SDK's
    TLS (rustls) refuses v1 certificates."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lifecycle tests CA")])
    ca = (
        _valid_for_a_day(x509.CertificateBuilder(), now)
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(name: str, usage: x509.ObjectIdentifier, names: list[x509.GeneralName]) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            _valid_for_a_day(x509.CertificateBuilder(), now)
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return _write(directory, name, key, builder.sign(ca_key, hashes.SHA256()))

    server_cert, server_key = leaf(
        "proxy",
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.DNSName(SERVER_NAME), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_cert, client_key = leaf("client", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    ca_path = directory / "ca.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return Certificates(ca_path, server_cert, server_key, client_cert, client_key)


def _valid_for_a_day(builder: x509.CertificateBuilder, now: datetime.datetime) -> x509.CertificateBuilder:
    return (
        builder.serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def _write(directory: Path, name: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> tuple[Path, Path]:
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return cert_path, key_path


class GrpcProxies:
    """nginx in the foreground: `mtls_address` wants a client certificate the CA signed, `api_key_address` a
    bearer key of NAMESPACE_OF_KEY for a request naming that key's namespace; both forward to `upstream` in
    plaintext."""

    def __init__(self, directory: Path, upstream: str, certificates: Certificates) -> None:
        self.directory = directory
        self.upstream = upstream
        self.certificates = certificates
        self.mtls_address = f"127.0.0.1:{free_port()}"
        self.api_key_address = f"127.0.0.1:{free_port()}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        config = self.directory / "nginx.conf"
        config.write_text(self._config())
        log = (self.directory / "nginx.log").open("ab")
        self._process = subprocess.Popen([nginx, "-c", str(config), "-p", str(self.directory)], stdout=log, stderr=log)
        for address in (self.mtls_address, self.api_key_address):
            wait_for_port(int(address.rsplit(":", 1)[1]), timeout=10)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(10)

    def mtls_environment(self, *, with_certificate: bool = True) -> dict[str, str]:
        """How a process reaches Temporal through the mutual-TLS proxy: envconfig's variables only."""
        env = {
            "TEMPORAL_ADDRESS": self.mtls_address,
            "TEMPORAL_TLS": "true",
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(self.certificates.ca),
            "TEMPORAL_TLS_SERVER_NAME": SERVER_NAME,
        }
        if with_certificate:
            env["TEMPORAL_TLS_CLIENT_CERT_PATH"] = str(self.certificates.client_cert)
            env["TEMPORAL_TLS_CLIENT_KEY_PATH"] = str(self.certificates.client_key)
        return env

    def api_key_environment(self, *, with_key: bool = True, key: str = API_KEY) -> dict[str, str]:
        """Through the API-key proxy, with the gateway's key unless told `key`."""
        env = {
            "TEMPORAL_ADDRESS": self.api_key_address,
            "TEMPORAL_TLS": "true",
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(self.certificates.ca),
            "TEMPORAL_TLS_SERVER_NAME": SERVER_NAME,
        }
        if with_key:
            env["TEMPORAL_API_KEY"] = key
        return env

    def _config(self) -> str:
        temp = self.directory
        certs = self.certificates
        # Long polls last up to 70 s: the read timeout stays above them.
        common = f"""
        ssl_certificate {certs.server_cert}; ssl_certificate_key {certs.server_key};
        grpc_read_timeout 120s; grpc_send_timeout 120s;"""
        keys = "".join(f'\n        "Bearer {key}" {namespace};' for key, namespace in NAMESPACE_OF_KEY.items())
        # This models a server's authorizer (Temporal Cloud's namespace-scoped API keys, or a self-hosted server's
        # claim mapper and authorizer), which lets a credential act in its own namespace only. The proxy reads the
        # namespace from the `temporal-namespace` header, which the SDK's core and the `temporal` CLI set from the
        # request's own namespace field. It does not model a client that names one namespace in the header and
        # another in the request, nor a workflow's commands aimed at another namespace (a child workflow, a
        # signal): a server's authorizer, reading the request and those commands, refuses any outside the
        # credential's namespace; this proxy passes them. Calls that name no namespace (GetSystemInfo at connect,
        # the operator service's cluster-wide calls such as listing Nexus endpoints) pass with either key, but for
        # the endpoint writes refused below.
        own_namespace = "".join(
            f'\n        "{namespace}|{namespace}" 1; "{namespace}|" 1;' for namespace in NAMESPACE_OF_KEY.values()
        )
        return f"""
daemon off;
worker_processes 1;
pid {temp}/nginx.pid;
error_log {temp}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {temp}/body; proxy_temp_path {temp}/proxy; fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi; scgi_temp_path {temp}/scgi;
    map $http_authorization $key_namespace {{
        default "";{keys}
    }}
    map "$key_namespace|$http_temporal_namespace" $in_own_namespace {{
        default 0;{own_namespace}
    }}
    server {{
        listen {self.mtls_address} ssl http2;{common}
        ssl_client_certificate {certs.ca}; ssl_verify_client on;
        location / {{ grpc_pass grpc://{self.upstream}; }}
    }}
    server {{
        listen {self.api_key_address} ssl http2;{common}
        # Nexus endpoints are the Temporal operator's, who reaches the server itself: no key changes one here.
        location ~ ^/temporal\\.api\\.operatorservice\\.v1\\.OperatorService/(Create|Update|Delete)NexusEndpoint$ {{
            return 403;
        }}
        location / {{
            if ($key_namespace = "") {{ return 401; }}
            if ($in_own_namespace = 0) {{ return 403; }}
            grpc_pass grpc://{self.upstream};
        }}
        # A gRPC answer, as a server's authorizer gives: PERMISSION_DENIED, not an HTTP error page.
        error_page 403 @permission_denied;
        location @permission_denied {{
            default_type application/grpc;
            add_header grpc-status 7 always;
            add_header grpc-message "{REFUSED}" always;
            return 200 "";
        }}
    }}
}}
"""
