package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"

	"github.com/lakedata/lake/client"
	"github.com/lakedata/lake/internal/tcpproxy"
	"github.com/lakedata/lake/internal/wiretest"
)

// httpGet asks a lake HTTP endpoint, with token as the bearer token ("":
// none), and returns the status and body.
func httpGet(t testing.TB, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// scrape reads a process's /metrics in the text format.
func scrape(t testing.TB, p *proc, token string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, "http://"+p.HTTPAddr()+"/metrics", token)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value is a counter's or gauge's value, or a histogram's sample count,
// of the series of name with the label pairs ("k=v"); 0 when the series
// does not exist yet.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	fam := fams[name]
series:
	for _, m := range fam.GetMetric() {
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			if !slices.ContainsFunc(m.GetLabel(), func(p *dto.LabelPair) bool { return p.GetName() == k && p.GetValue() == v }) {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// TestMetricsMoveWithAppends: N appends through a real `lake serve` move
// the append counter and the append latency histogram by exactly N, and
// the query role's relay by N appends.
func TestMetricsMoveWithAppends(t *testing.T) {
	dir := t.TempDir()
	p := startLakeEnv(t, []string{"AWS_EC2_METADATA_DISABLED=true"}, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--http-listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"))
	if p.HTTPAddr() == "" {
		t.Fatalf("no HTTP address logged:\n%s", p.output())
	}
	// The roles' metrics are served once both roles are open.
	waitStatus(t, "http://"+p.HTTPAddr()+"/readyz", http.StatusOK, "", 20*time.Second)
	ctx := withTimeout(t, 2*time.Minute)
	endpoint := "grpc://" + p.Addr()
	seed := seedTable(t, ctx, endpoint)
	cl, err := client.Connect(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	before := scrape(t, p, "")
	const n = 7
	for i := range n {
		rec := wiretest.FileRow(fmt.Sprintf("clip-%d", i), seed)
		_, err := cl.Append(ctx, "clips", rec, client.AppendOptions{})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	after := scrape(t, p, "")
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"lake_meta_appends_total", []string{"outcome=ok"}},
		{"lake_meta_append_seconds", nil},
		{"lake_query_relayed_appends_total", nil},
	} {
		if d := value(after, c.name, c.labels...) - value(before, c.name, c.labels...); d != n {
			t.Errorf("%s%v rose by %v, want %d", c.name, c.labels, d, n)
		}
	}
	if got := value(after, "lake_meta_table_versions", "table=clips"); got != 1+n {
		t.Errorf("versions of clips = %v, want %d (the seed and %d appends)", got, 1+n, n)
	}
	if value(after, "go_goroutines") == 0 || after["process_cpu_seconds_total"] == nil {
		t.Error("the Go runtime and process collectors are missing")
	}
	if code, body := httpGet(t, "http://"+p.HTTPAddr()+"/readyz", ""); code != http.StatusOK {
		t.Errorf("/readyz of a running lake serve: %d %s", code, body)
	}
}

// TestHTTPTokens: with a token file, /metrics and /readyz refuse a request
// without a valid token (401, no metric text), take a read token, and are
// open with --http-open-metrics; /healthz is always open.
func TestHTTPTokens(t *testing.T) {
	dir := t.TempDir()
	tok := newScopeTokens()
	file := writeTokenFile(t, dir, "tokens", tok.read+" read", tok.write+" write", tok.admin+" admin")
	env := []string{"AWS_EC2_METADATA_DISABLED=true"}
	start := func(name string, extra ...string) *proc {
		args := append([]string{"serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
			"--token-file", file, "--data-dir", filepath.Join(dir, name)}, extra...)
		return startLakeEnv(t, env, args...)
	}
	p := start("guarded")
	base := "http://" + p.HTTPAddr()
	waitStatusAs(t, base+"/readyz", tok.read, http.StatusOK, "", 20*time.Second)
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "not-" + tok.read, http.StatusUnauthorized},
		{"/readyz", "", http.StatusUnauthorized},
		{"/healthz", "", http.StatusOK},
		{"/metrics", tok.read, http.StatusOK},
		{"/readyz", tok.read, http.StatusOK},
	} {
		code, body := httpGet(t, base+c.path, c.token)
		if code != c.want {
			t.Errorf("%s with token %v: %d, want %d: %s", c.path, c.token != "", code, c.want, body)
		}
		if code == http.StatusUnauthorized && strings.Contains(body, "lake_") {
			t.Errorf("%s refused but answered metric text: %s", c.path, body)
		}
		if code == http.StatusOK && c.path == "/metrics" && !strings.Contains(body, "lake_meta_appends_total") {
			t.Errorf("/metrics with a read token lacks lake's metrics")
		}
	}
	if strings.Contains(p.output(), tok.read) {
		t.Error("a token reached the log")
	}
	open := start("open", "--http-open-metrics")
	waitStatus(t, "http://"+open.HTTPAddr()+"/readyz", http.StatusOK, "", 20*time.Second)
	code, body := httpGet(t, "http://"+open.HTTPAddr()+"/metrics", "")
	if code != http.StatusOK || !strings.Contains(body, "lake_query_seconds") {
		t.Errorf("--http-open-metrics: /metrics without a token: %d", code)
	}
}

// TestReadyzFollowerCatchUp: a meta follower whose stage reads are held
// (a stalled network to S3) while the leader commits says it is not ready,
// and how far behind it is; once its reads flow again it catches up and
// says ready. The leader is ready throughout.
func TestReadyzFollowerCatchUp(t *testing.T) {
	c := newHACluster(t, 2, haTTL)
	c.start(0)
	leader := c.waitLeader(c.metas[0].addr, 15*time.Second)
	stall := tcpproxy.Start(t, strings.TrimPrefix(c.gw.Endpoint, "http://"))
	f := c.metas[1]
	f.p = startLake(t, "serve", "--role=meta", "--listen", f.addr, "--data-dir", f.dataDir,
		"--stage", "s3://"+c.bucket+"/lake", "--s3-endpoint", "http://"+stall.Addr,
		"--etcd", c.etcd.Endpoint, "--session-ttl", c.ttl.String(), "--http-listen", "127.0.0.1:0")
	readyz := "http://" + f.p.HTTPAddr() + "/readyz"
	waitStatus(t, readyz, http.StatusOK, "", 20*time.Second)

	stall.Hold()
	ctx := withTimeout(t, 2*time.Minute)
	cl, err := client.Connect(ctx, "grpc://"+leader)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seed := seedTable(t, ctx, "grpc://"+leader)
	for i := range 3 {
		rec := wiretest.FileRow(fmt.Sprintf("clip-%d", i), seed)
		_, err := cl.Append(ctx, "clips", rec, client.AppendOptions{})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	body := waitStatus(t, readyz, http.StatusServiceUnavailable, "behind the leader", 20*time.Second)
	t.Logf("follower held: %s", strings.TrimSpace(body))
	fams := scrape(t, f.p, "")
	if lag := value(fams, "lake_meta_follower_lag_versions"); lag < 1 {
		t.Errorf("follower lag while held = %v, want at least 1", lag)
	}
	if got := value(fams, "lake_meta_leader"); got != 0 {
		t.Errorf("follower reports lake_meta_leader %v", got)
	}

	stall.Release()
	// One more commit, so a catch-up that gave up while held is asked
	// for again.
	rec := wiretest.FileRow("after", seed)
	if _, err := cl.Append(ctx, "clips", rec, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	waitStatus(t, readyz, http.StatusOK, "", 30*time.Second)
	// Ready as soon as it applied what it heard; the last announcement
	// may still be on its way, and then it applies that too.
	deadline := time.Now().Add(30 * time.Second)
	for {
		fams = scrape(t, f.p, "")
		if value(fams, "lake_meta_table_versions", "table=clips") == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower never reached version 5 of clips: %v", value(fams, "lake_meta_table_versions", "table=clips"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if lag := value(fams, "lake_meta_follower_lag_versions"); lag != 0 {
		t.Errorf("follower lag once caught up = %v", lag)
	}
	if code, body := httpGet(t, readyz, ""); code != http.StatusOK {
		t.Errorf("caught-up follower: /readyz %d %s", code, body)
	}
}

// waitStatus polls url until it answers want with a body containing
// substr, and returns that body; it fails the test after within.
func waitStatus(t testing.TB, url string, want int, substr string, within time.Duration) string {
	t.Helper()
	return waitStatusAs(t, url, "", want, substr, within)
}

// waitStatusAs is waitStatus presenting token.
func waitStatusAs(t testing.TB, url, token string, want int, substr string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	var code int
	var body string
	for time.Now().Before(deadline) {
		code, body = httpGet(t, url, token)
		if code == want && strings.Contains(body, substr) {
			return body
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not answer %d %q within %v; last %d %q", url, want, substr, within, code, body)
	return ""
}

// BenchmarkMetricsScrape measures /metrics of a real `lake serve` holding
// 10 tables of a few versions each: the median of the scrapes' times.
func BenchmarkMetricsScrape(b *testing.B) {
	if os.Getenv("LAKE_BENCH_HTTP") != "1" {
		b.Skip("set LAKE_BENCH_HTTP=1 to run the /metrics scrape benchmark (starts lake serve, fills 10 tables)")
	}
	dir := b.TempDir()
	p := startLakeEnv(b, []string{"AWS_EC2_METADATA_DISABLED=true"}, "serve", "--listen", "127.0.0.1:0", "--meta-listen", "127.0.0.1:0",
		"--http-listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := client.Connect(ctx, "grpc://"+p.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	waitStatus(b, "http://"+p.HTTPAddr()+"/readyz", http.StatusOK, "", 20*time.Second)
	for i := range 10 {
		table := fmt.Sprintf("t%02d", i)
		if _, err := cl.CreateTable(ctx, table, nil, false); err != nil {
			b.Fatal(err)
		}
		for j := range 5 {
			if _, err := cl.PutReader(ctx, table, fmt.Sprintf("o%d", j), strings.NewReader("object "+table), client.PutOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	url := "http://" + p.HTTPAddr() + "/metrics"
	var took []time.Duration
	var size int
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		code, body := httpGet(b, url, "")
		took = append(took, time.Since(start))
		if code != http.StatusOK {
			b.Fatalf("/metrics: %d", code)
		}
		size = len(body)
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(size), "bytes")
}
