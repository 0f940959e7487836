"""A real OpenID Connect provider for the sign-in tests (Node's oidc-provider, pinned in tests/oidc/package.json):
its packages installed once with npm (from npm's cache when offline), started on a free loopback port with one
client and the test accounts, healthy (its discovery document answers) before it is used, stopped after."""

import json
import shutil
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.browser_helper import free_port

FOLDER = Path(__file__).resolve().parent / "oidc"
CLIENT_ID, CLIENT_SECRET = "pinpoint", "pinpoint-test-client-secret"


def installed_reason() -> str | None:
    """None once oidc-provider is installed under tests/oidc (npm ci when it is not), else why it cannot be."""
    if (FOLDER / "node_modules" / "oidc-provider" / "package.json").exists():
        return None
    if not shutil.which("node") or not shutil.which("npm"):
        return "node and npm are needed for the test OpenID provider (oidc-provider)"
    done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--prefer-offline"], cwd=FOLDER,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return f"npm could not install oidc-provider: {(done.stderr.strip().splitlines() or ['?'])[-1][:200]}"
    return None


@dataclass
class Provider:
    issuer: str
    process: subprocess.Popen

    @property
    def metadata_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    def secrets(self, redirect_uri: str, cookie_secret: str) -> str:
        """secrets.toml's [auth] for an app whose sign-in callback is ``redirect_uri``."""
        return (f'[auth]\nredirect_uri = "{redirect_uri}"\ncookie_secret = "{cookie_secret}"\n'
                f'client_id = "{CLIENT_ID}"\nclient_secret = "{CLIENT_SECRET}"\n'
                f'server_metadata_url = "{self.metadata_url}"\n'
                # Streamlit asks for prompt=select_account unless told otherwise; oidc-provider knows login
                'client_kwargs = { prompt = "login" }\n')


@contextmanager
def oidc_provider(folder: Path, redirect_uri: str, accounts: dict[str, dict]):
    """The provider, its client redirecting to ``redirect_uri``; ``accounts``: login → extra claims (groups,
    email_verified). Any password signs an account in (its login page is oidc-provider's own)."""
    reason = installed_reason()
    if reason:
        pytest.skip(reason)
    port = free_port()
    config = folder / "oidc-provider.json"
    config.write_text(json.dumps({"client": {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
                                             "redirect_uri": redirect_uri}, "accounts": accounts}))
    log = (folder / "oidc-provider.log").open("wb")
    process = subprocess.Popen(["node", "provider.mjs", str(port), str(config)], cwd=FOLDER, stdout=log,
                               stderr=subprocess.STDOUT)
    provider = Provider(f"http://127.0.0.1:{port}", process)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if "authorization_endpoint" in json.load(urllib.request.urlopen(provider.metadata_url, timeout=2)):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                pytest.fail("the test OpenID provider did not start:\n"
                            + (folder / "oidc-provider.log").read_text(errors="replace")[-2000:])
            time.sleep(0.2)
        yield provider
    finally:
        stop(provider)
        log.close()


def stop(provider: Provider) -> None:
    if provider.process.poll() is None:
        provider.process.terminate()
        provider.process.wait(10)
