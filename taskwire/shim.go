package taskwire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The go-sdk parses tools/call params into a struct without task or
// idempotencyKey fields, and subscriptions/listen params into one without
// notifications.taskIds, so all three are lost before any middleware runs.
// The inbound shim moves them into reserved _meta keys while the request is
// still bytes, together with the JSON-RPC request ID, which middleware cannot
// see either. Reserved keys a client sends itself are dropped first, so they
// can only ever hold what the shim put there.

// shimRequest rewrites one JSON-RPC message. Messages it does not need to
// touch, or cannot parse, are returned unchanged for the SDK to handle.
func shimRequest(msg []byte) []byte {
	if !bytes.Contains(msg, []byte(`"tools/call"`)) && !bytes.Contains(msg, []byte(`"tasks/`)) &&
		!bytes.Contains(msg, []byte(`"`+methodSubscriptionsListen+`"`)) {
		return msg
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(msg, &env); err != nil {
		return msg
	}
	var method string
	if err := json.Unmarshal(env["method"], &method); err != nil {
		return msg
	}
	if method != methodCallTool && !strings.HasPrefix(method, "tasks/") && method != methodSubscriptionsListen {
		return msg
	}
	raw, ok := env["params"]
	if !ok || len(raw) == 0 || raw[0] != '{' {
		return msg
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(raw, &params); err != nil {
		return msg
	}
	meta := map[string]json.RawMessage{}
	if m, ok := params["_meta"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return msg
		}
	}
	delete(meta, metaTask)
	delete(meta, MetaIdempotencyKey)
	delete(meta, metaRequestID)
	delete(meta, metaTaskIDs)
	if method == methodSubscriptionsListen {
		var n map[string]json.RawMessage
		if json.Unmarshal(params["notifications"], &n) == nil {
			if v, ok := n["taskIds"]; ok {
				meta[metaTaskIDs] = v
			}
		}
	}
	if method == methodCallTool {
		if v, ok := params["task"]; ok {
			meta[metaTask] = v
			delete(params, "task")
		}
		if v, ok := params["idempotencyKey"]; ok {
			meta[MetaIdempotencyKey] = v
			delete(params, "idempotencyKey")
		}
	}
	if id, ok := env["id"]; ok && string(id) != "null" {
		var compact bytes.Buffer
		if err := json.Compact(&compact, id); err != nil {
			return msg
		}
		idText, err := marshalJSON(compact.String())
		if err != nil {
			return msg
		}
		meta[metaRequestID] = idText
	}
	var err error
	if params["_meta"], err = marshalJSON(meta); err != nil {
		return msg
	}
	if env["params"], err = marshalJSON(params); err != nil {
		return msg
	}
	out, err := marshalJSON(env)
	if err != nil {
		return msg
	}
	return out
}

// shimBody rewrites an HTTP request body holding one message or a batch.
func shimBody(body []byte) []byte { return rewriteBody(body, shimRequest) }

// NewStdioTransport returns a transport for serving an *mcp.Server (set up
// with [Install]) over newline-delimited JSON, like mcp.StdioTransport over
// in and out, but with the inbound shim applied to every line. in and out
// are closed when the session ends if they implement io.Closer.
func NewStdioTransport(in io.Reader, out io.Writer) mcp.Transport {
	return &mcp.IOTransport{
		Reader: &shimReader{src: bufio.NewReader(in), closer: in},
		Writer: writeCloser{out},
	}
}

// shimReader applies shimRequest to each line of a newline-delimited JSON
// stream.
type shimReader struct {
	src     *bufio.Reader
	closer  io.Reader
	pending []byte
	err     error
}

func (r *shimReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		line, err := r.readLine()
		r.err = err
		if len(line) == 0 {
			continue
		}
		body := bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(body)) == 0 {
			r.pending = line
			continue
		}
		r.pending = append(shimBody(body), '\n')
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// readLine reads one line of at most mcp.DefaultMaxLineLength bytes.
func (r *shimReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.src.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > mcp.DefaultMaxLineLength {
			return nil, fmt.Errorf("taskwire: stdio message exceeds %d bytes", mcp.DefaultMaxLineLength)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

func (r *shimReader) Close() error {
	if c, ok := r.closer.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

type writeCloser struct{ io.Writer }

func (w writeCloser) Close() error {
	if c, ok := w.Writer.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
