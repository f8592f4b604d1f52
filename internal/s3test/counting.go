package s3test

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Request kinds a CountingProxy tells apart.
const (
	GetObject   = "GetObject"
	HeadObject  = "HeadObject"
	PutObject   = "PutObject" // and UploadPart
	ListObjects = "ListObjects"
	Multipart   = "Multipart" // CreateMultipartUpload, CompleteMultipartUpload, ListParts, Abort
	Delete      = "Delete"    // DeleteObject, and DeleteObjects (a POST ?delete of up to 1000 keys)
	Other       = "Other"
)

// CountingProxy forwards S3 requests to a gateway on 127.0.0.1 and counts
// them by kind, so a test can assert how many requests a lake process
// made (a cold start's GETs, a small put's one PUT) from outside it.
type CountingProxy struct {
	// Endpoint is the proxy's http://127.0.0.1:port, to give a process as
	// its S3 endpoint instead of the gateway's.
	Endpoint string

	mu     sync.Mutex
	counts map[string]int
}

// StartCountingProxy proxies to the gateway at endpoint until t ends.
func StartCountingProxy(t testing.TB, endpoint string) *CountingProxy {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatalf("s3test: proxy target %q: %v", endpoint, err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CountingProxy{Endpoint: "http://" + lis.Addr().String(), counts: make(map[string]int)}
	rp := httputil.NewSingleHostReverseProxy(target)
	// A client that hangs up (a process the test killed) is not news.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.count(r)
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	return p
}

// kind classifies a path-style S3 request (/bucket/key?query).
func kind(r *http.Request) string {
	q := r.URL.Query()
	object := strings.Count(strings.Trim(r.URL.Path, "/"), "/") >= 1
	switch {
	case r.Method == http.MethodDelete && !q.Has("uploadId") || r.Method == http.MethodPost && q.Has("delete"):
		return Delete
	case q.Has("uploads") || q.Has("uploadId") && r.Method != http.MethodPut:
		return Multipart
	case r.Method == http.MethodGet && !object:
		return ListObjects
	case r.Method == http.MethodGet:
		return GetObject
	case r.Method == http.MethodHead && object:
		return HeadObject
	case r.Method == http.MethodPut && object:
		return PutObject
	}
	return Other
}

func (p *CountingProxy) count(r *http.Request) {
	k := kind(r)
	p.mu.Lock()
	p.counts[k]++
	p.mu.Unlock()
}

// Take returns the counts since the last Take and starts again from zero.
func (p *CountingProxy) Take() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.counts
	p.counts = make(map[string]int)
	return out
}
