// A tool-call origin whose messages are decoded by Go's encoding/json, as mark3labs/mcp-go and
// other Go MCP servers decode them: struct fields matched case-insensitively, the last of two
// equal keys kept. It runs every tools/call it decodes (counting it by tool name) and reports
// what it ran and every request line it was sent, so a test can check that the proxy forwarded
// exactly the calls it metered. Standard library only; listens on 127.0.0.1, port from argv.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
)

type params struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  *params         `json:"params"`
}

var (
	mu    sync.Mutex
	ran   = map[string]int{}
	lines []string
)

func answer(m message) map[string]any {
	reply := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	switch m.Method {
	case "initialize":
		reply["result"] = map[string]any{
			"protocolVersion": "2025-06-18",
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": "go-origin", "version": "1.0.0"},
		}
	case "tools/call":
		name := ""
		if m.Params != nil {
			name = m.Params.Name
		}
		mu.Lock()
		ran[name]++
		mu.Unlock()
		reply["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": "ran " + name}}}
	case "tools/list":
		reply["result"] = map[string]any{"tools": []any{
			map[string]any{"name": "free", "inputSchema": map[string]any{"type": "object"}},
			map[string]any{"name": "paid", "inputSchema": map[string]any{"type": "object"}},
		}}
	default:
		reply["result"] = map[string]any{}
	}
	return reply
}

func mcp(w http.ResponseWriter, r *http.Request) {
	mu.Lock()
	lines = append(lines, r.Method+" "+r.RequestURI)
	mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	trimmed := strings.TrimSpace(string(body))
	var replies []map[string]any
	if strings.HasPrefix(trimmed, "[") {
		var batch []message
		if json.Unmarshal(body, &batch) != nil {
			http.Error(w, "bad json", 400)
			return
		}
		for _, m := range batch {
			if len(m.ID) > 0 && string(m.ID) != "null" {
				replies = append(replies, answer(m))
			} else if m.Method == "tools/call" {
				answer(m) // a notification is still run by a lax server
			}
		}
		if len(replies) == 0 {
			w.WriteHeader(202)
			return
		}
		w.Header().Set("content-type", "application/json")
		json.NewEncoder(w).Encode(replies)
		return
	}
	var m message
	if r.Method != "POST" || json.Unmarshal(body, &m) != nil {
		w.WriteHeader(405)
		return
	}
	reply := answer(m)
	if len(m.ID) == 0 || string(m.ID) == "null" {
		w.WriteHeader(202)
		return
	}
	w.Header().Set("content-type", "application/json")
	json.NewEncoder(w).Encode(reply)
}

func report(w http.ResponseWriter, _ *http.Request) {
	mu.Lock()
	defer mu.Unlock()
	w.Header().Set("content-type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"ran": ran, "lines": lines})
}

func main() {
	listener, err := net.Listen("tcp", "127.0.0.1:"+os.Args[1])
	if err != nil {
		panic(err)
	}
	fmt.Println(listener.Addr().(*net.TCPAddr).Port)
	mux := http.NewServeMux()
	mux.HandleFunc("/__report", report)
	mux.HandleFunc("/", mcp)
	http.Serve(listener, mux)
}
