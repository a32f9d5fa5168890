"""The Python MCP SDK (PyPI `mcp` 2.x) calling a tool when told, driven by a test over stdin.

Arguments: the MCP server URL at the proxy, an access token and the SDK's connect mode (`legacy`
for the MCP 2025 handshake, `2026-07-28` pinned, or `auto`). Connects, prints `READY`, then for
each line `<tool> <json arguments>` read from stdin calls that tool in the same session and prints
`RESULT <json>`: the result's text and isError, or the error's code, message and data. Ends at the
end of stdin. Used by proxy/test/origin-failures.test.ts to call while another request holds the
origin's only connection, then again once it is free.
"""

import asyncio
import json
import sys
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    return {
        "text": "".join(block.text for block in result.content if isinstance(block, types.TextContent)),
        "isError": bool(result.is_error),
    }


async def main(server_url: str, token: str, mode: str) -> None:
    loop = asyncio.get_running_loop()
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(server_url, http_client=http), mode=mode) as client:
            print("READY", flush=True)
            while line := await loop.run_in_executor(None, sys.stdin.readline):
                name, arguments = line.strip().split(" ", 1)
                try:
                    answer = outcome(await client.call_tool(name, json.loads(arguments)))
                except MCPError as error:
                    answer = {"error": {"code": error.code, "message": error.error.message, "data": error.error.data}}
                print("RESULT " + json.dumps(answer), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
