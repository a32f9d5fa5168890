"""The Python MCP SDK's OAuth client (PyPI `mcp`), driven by test/e2e/customer-sign-in.test.ts.

Given only an MCP server URL and a loopback redirect URI, the SDK discovers the authorization
server through the server's 401, registers, and asks for the browser: this script prints
`AUTHORIZE <url>` for the test, which signs the customer in with Chromium and writes the URL the
browser landed on back on stdin. The SDK exchanges the code, then the script calls a tool and
prints `RESULT <json>` with what the tool answered and the tokens' subject.
"""

import asyncio
import base64
import json
import sys
from urllib.parse import parse_qs, urlparse

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken


class MemoryStorage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


async def open_browser(url: str) -> None:
    print(f"AUTHORIZE {url}", flush=True)


async def wait_for_callback() -> AuthorizationCodeResult:
    line = await asyncio.to_thread(sys.stdin.readline)
    query = parse_qs(urlparse(line.strip()).query)
    return AuthorizationCodeResult(
        code=query["code"][0],
        state=query.get("state", [None])[0],
        iss=query.get("iss", [None])[0],
    )


async def main(server_url: str, redirect_uri: str) -> None:
    storage = MemoryStorage()
    auth = OAuthClientProvider(
        server_url=server_url,
        client_metadata=OAuthClientMetadata(
            client_name="Python MCP SDK",
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=open_browser,
        callback_handler=wait_for_callback,
    )
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with Client(streamable_http_client(server_url, http_client=http)) as client:
            result = await client.call_tool("add", {"a": 20, "b": 22})
    token = storage.tokens.access_token if storage.tokens else ""
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    print(
        "RESULT "
        + json.dumps(
            {
                "text": result.content[0].text,
                "isError": result.is_error,
                "sub": claims["sub"],
                "aud": claims["aud"],
                "clientId": storage.client_info.client_id if storage.client_info else None,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
