// Command mcpserver is a tiny MCP server over stdio for the environment's
// tests: one tool that answers, one that never does, one that reports an
// error, one that returns an image and one with structured output only.
// With -http ADDR it serves the same tools over streamable HTTP instead, and
// with -sse ADDR over the legacy HTTP+SSE transport, and prints its URL.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type empty struct{}

// onePixelPNG is a valid 1x1 PNG.
var onePixelPNG = []byte{
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
	0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x60, 0x00, 0x02, 0x00,
	0x00, 0x05, 0x00, 0x01, 0x7a, 0x5e, 0xab, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44,
	0xae, 0x42, 0x60, 0x82,
}

func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "penguin-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answer."},
		func(ctx context.Context, req *mcp.CallToolRequest, in empty) (*mcp.CallToolResult, any, error) {
			<-make(chan struct{}) // ignores cancellation on purpose
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Report a tool error."},
		func(ctx context.Context, req *mcp.CallToolRequest, in empty) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the widget is broken"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "picture", Description: "Return an image."},
		func(ctx context.Context, req *mcp.CallToolRequest, in empty) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a pixel"},
				&mcp.ImageContent{MIMEType: "image/png", Data: onePixelPNG},
			}}, nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "structured", Description: "Structured output only.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: map[string]any{"answer": 42}}, nil
		})
	return s
}

func main() {
	httpAddr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	sseAddr := flag.String("sse", "", "serve the legacy HTTP+SSE transport on this address instead of stdio")
	flag.Parse()
	s := newServer()
	var h http.Handler
	addr := *httpAddr
	switch {
	case *httpAddr != "":
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	case *sseAddr != "":
		h, addr = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil), *sseAddr
	default:
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "http://%s/mcp\n", lis.Addr())
	log.Fatal(http.Serve(lis, h))
}
