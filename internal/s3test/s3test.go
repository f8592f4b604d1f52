package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lakedata/lake/internal/freeport"
)

const (
	// Package and Version name the gateway that Binary installs.
	Package = "github.com/versity/versitygw/cmd/versitygw"
	Version = "v1.8.0"

	// Region is the region every gateway answers for (versitygw's default).
	Region = "us-east-1"

	installTimeout = 15 * time.Minute
	readyTimeout   = 30 * time.Second
	startAttempts  = 3
	outputLimit    = 64 << 10 // bytes of gateway output kept for failure logs
	failureLogTail = 16 << 10 // bytes of it shown when a test fails
)

var install struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of a versitygw executable: from PATH, else from
// the Go bin directory ($GOBIN, or $(go env GOPATH)/bin), else installed
// there by `go install Package@Version`, at most once per process and under
// a lock shared with other test processes. GOFLAGS is cleared for the
// install so the caller's build tags do not leak into it. A failed install
// fails t with the command's output.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := binary(t.Logf)
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	return p
}

func binary(logf func(string, ...any)) (string, error) {
	install.once.Do(func() { install.path, install.err = findOrInstall(logf) })
	return install.path, install.err
}

func findOrInstall(logf func(string, ...any)) (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("versitygw is not installed and the go command is missing: %w", err)
	}
	binDir, err := goBinDir(goTool)
	if err != nil {
		return "", err
	}
	target := filepath.Join(binDir, "versitygw"+exeSuffix)
	if isFile(target) {
		return target, nil
	}
	// Packages tested in parallel would otherwise all build it, and write
	// the same file at the same time.
	unlock, err := lockFile(filepath.Join(os.TempDir(), "lake-s3test-install.lock"))
	if err != nil {
		return "", fmt.Errorf("lock for install: %w", err)
	}
	defer unlock()
	if isFile(target) { // another process installed it while we waited
		return target, nil
	}
	msg := fmt.Sprintf("s3test: versitygw not found; running go install %s@%s into %s (takes a few minutes once)", Package, Version, binDir)
	logf("%s", msg)
	fmt.Fprintln(os.Stderr, msg)
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "install", Package+"@"+Version)
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go install %s@%s: %v\n%s", Package, Version, err, out)
	}
	if !isFile(target) {
		return "", fmt.Errorf("go install %s@%s succeeded but %s is missing\n%s", Package, Version, target, out)
	}
	logf("s3test: installed %s in %v", target, time.Since(start).Round(time.Second))
	return target, nil
}

// goBinDir is where go install puts binaries.
func goBinDir(goTool string) (string, error) {
	cmd := exec.Command(goTool, "env", "GOBIN", "GOPATH")
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 2 {
		return "", fmt.Errorf("go env GOBIN GOPATH: unexpected output %q", out)
	}
	if lines[0] != "" {
		return lines[0], nil
	}
	gopath := filepath.SplitList(lines[1])
	if len(gopath) == 0 || gopath[0] == "" {
		return "", fmt.Errorf("go env: no GOPATH")
	}
	return filepath.Join(gopath[0], "bin"), nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// Server is a running versitygw with the posix backend on 127.0.0.1.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	AccessKey string // root credentials, random per server
	SecretKey string
	Region    string
	Dir       string // the posix root: one directory per bucket

	cmd      *exec.Cmd
	out      *tail
	done     chan struct{} // closed once the process has exited
	waitErr  error         // valid after done
	stopOnce sync.Once
	buckets  atomic.Int64
}

// Start runs a gateway for t, with its data under t.TempDir(), and stops it
// when t ends. Its output goes to t's log if t fails.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	s, err := start(bin, t.TempDir())
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			s.logOutput(t)
		}
	})
	return s
}

var shared struct {
	mu      sync.Mutex
	started bool
	srv     *Server
	dir     string
	err     error
}

// Shared returns the gateway shared by the whole test binary, starting it on
// first use. Call RunShared from TestMain so it is stopped at the end. Tests
// using it must not assume an empty server: each should make its own bucket
// (NewBucket).
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	if !shared.started {
		shared.started = true
		shared.err = startShared(t.Logf)
	}
	s, err := shared.srv, shared.err
	shared.mu.Unlock()
	if err != nil {
		t.Fatalf("s3test: shared gateway: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			s.logOutput(t)
		}
	})
	return s
}

func startShared(logf func(string, ...any)) error {
	bin, err := binary(logf)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "lake-s3test-")
	if err != nil {
		return err
	}
	s, err := start(bin, dir)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	shared.srv, shared.dir = s, dir
	return nil
}

// RunShared runs the tests, then stops the shared gateway (if any test
// started it) and removes its data. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(s3test.RunShared(m)) }
func RunShared(m *testing.M) int {
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		shared.srv.stop()
		os.RemoveAll(shared.dir)
		shared.srv = nil
	}
	return code
}

var errPortTaken = errors.New("port taken")

func start(bin, dir string) (*Server, error) {
	for attempt := 1; ; attempt++ {
		s, err := startOnce(bin, dir)
		if err == nil || attempt == startAttempts || !errors.Is(err, errPortTaken) {
			return s, err
		}
	}
}

func startOnce(bin, dir string) (*Server, error) {
	// Another process may take the port before versitygw binds it; start
	// retries then.
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint:  "http://" + addr,
		AccessKey: "AK" + rand.Text()[:18],
		SecretKey: rand.Text() + rand.Text()[:14],
		Region:    Region,
		Dir:       dir,
		out:       &tail{limit: outputLimit},
		done:      make(chan struct{}),
	}
	// No --data-integrity-etag: ETags stay MD5-based as on AWS S3; the MD5
	// cost is irrelevant at test sizes.
	s.cmd = exec.Command(bin,
		"--port", addr,
		"--access", s.AccessKey, "--secret", s.SecretKey,
		"--region", s.Region,
		"posix", dir)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.Env = gatewayEnv()
	setParentDeathSignal(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(); err != nil {
		s.stop()
		out := s.out.String()
		if strings.Contains(out, "address already in use") {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return nil, fmt.Errorf("versitygw on %s: %w\noutput:\n%s", addr, err, out)
	}
	return s, nil
}

// gatewayEnv is the caller's environment without the variables versitygw
// reads its settings from, so only the flags above configure it.
func gatewayEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "VGW_") || strings.HasPrefix(kv, "ROOT_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// waitReady polls ListBuckets until the gateway answers, it exits, or
// readyTimeout passes.
func (s *Server) waitReady() error {
	c := s.newClient(func(o *s3.Options) { o.Retryer = aws.NopRetryer{} })
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not answering after %v: %w", readyTimeout, err)
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited: %v", s.waitErr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Server) stop() {
	s.stopOnce.Do(func() {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Kill()
			<-s.done
		}
	})
}

func (s *Server) logOutput(t testing.TB) {
	out := s.out.String()
	if len(out) > failureLogTail {
		out = "…" + out[len(out)-failureLogTail:]
	}
	t.Logf("versitygw %s output:\n%s", s.Endpoint, out)
}

// Output returns the last bytes the gateway wrote to stdout and stderr.
func (s *Server) Output() string { return s.out.String() }

// Client returns an S3 client for the gateway: path-style addressing and the
// root credentials, and no shared AWS configuration.
func (s *Server) Client(t testing.TB) *s3.Client {
	t.Helper()
	return s.newClient()
}

func (s *Server) newClient(optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	}, optFns...)
}

// Bucket creates bucket name; an error fails t.
func (s *Server) Bucket(t testing.TB, name string) {
	t.Helper()
	_, err := s.newClient().CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(name)})
	if err != nil {
		t.Fatalf("s3test: create bucket %s: %v", name, err)
	}
}

// NewBucket creates a bucket with a fresh name and returns the name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", s.buckets.Add(1), strings.ToLower(rand.Text()[:10]))
	s.Bucket(t, name)
	return name
}

// SetEnv points the AWS default credential chain at this gateway's root
// credentials and region through t.Setenv (so t and its parents must not be
// parallel). It also blanks what could pull in anything else: profiles,
// session tokens, endpoint overrides, role and container credentials, the
// user's shared config files (replaced by empty ones), and the EC2 instance
// metadata service. The endpoint itself is not set: code under test must
// pass it explicitly.
func (s *Server) SetEnv(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	cfgFile, credFile := filepath.Join(dir, "config"), filepath.Join(dir, "credentials")
	for _, f := range []string{cfgFile, credFile} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range [][2]string{
		{"AWS_ACCESS_KEY_ID", s.AccessKey},
		{"AWS_SECRET_ACCESS_KEY", s.SecretKey},
		{"AWS_REGION", s.Region},
		{"AWS_CONFIG_FILE", cfgFile},
		{"AWS_SHARED_CREDENTIALS_FILE", credFile},
		{"AWS_EC2_METADATA_DISABLED", "true"},
		{"AWS_DEFAULT_REGION", ""},
		{"AWS_SESSION_TOKEN", ""},
		{"AWS_PROFILE", ""},
		{"AWS_DEFAULT_PROFILE", ""},
		{"AWS_ENDPOINT_URL", ""},
		{"AWS_ENDPOINT_URL_S3", ""},
		{"AWS_ROLE_ARN", ""},
		{"AWS_WEB_IDENTITY_TOKEN_FILE", ""},
		{"AWS_CONTAINER_CREDENTIALS_FULL_URI", ""},
		{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", ""},
	} {
		t.Setenv(kv[0], kv[1])
	}
}

// tail keeps the last limit bytes written to it, and at most twice that.
type tail struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > 2*w.limit {
		w.buf = bytes.Clone(w.buf[len(w.buf)-w.limit:])
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > w.limit {
		return string(w.buf[len(w.buf)-w.limit:])
	}
	return string(w.buf)
}
