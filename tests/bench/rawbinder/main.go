// Command rawbinder binds every pending pod of one schedulerName to a node,
// round-robin, with no scheduling logic at all. It measures the API server's
// own ceiling for pod bindings on this machine: a real scheduler can only be
// slower, because it does this plus the filter and score work.
//
// It depends on the standard library only, so it builds offline in seconds.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type config struct {
	server        string
	caFile        string
	certFile      string
	keyFile       string
	token         string
	schedulerName string
	nodeSelector  string
	concurrency   int
	qps           float64
	burst         int
}

type objectMeta struct {
	Name              string  `json:"name"`
	Namespace         string  `json:"namespace"`
	UID               string  `json:"uid"`
	ResourceVersion   string  `json:"resourceVersion"`
	DeletionTimestamp *string `json:"deletionTimestamp"`
}

type pod struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		NodeName        string `json:"nodeName"`
		SchedulerName   string `json:"schedulerName"`
		SchedulingGates []struct {
			Name string `json:"name"`
		} `json:"schedulingGates"`
	} `json:"spec"`
}

type podList struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
		Continue        string `json:"continue"`
	} `json:"metadata"`
	Items []pod `json:"items"`
}

type nodeList struct {
	Metadata struct {
		Continue string `json:"continue"`
	} `json:"metadata"`
	Items []struct {
		Metadata objectMeta `json:"metadata"`
	} `json:"items"`
}

type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// errGone means the watch's resourceVersion is too old and the pods must be relisted.
var errGone = errors.New("resource version expired (410 Gone)")

// tokenBucket is client-go's flowcontrol.NewTokenBucketRateLimiter in miniature,
// so a throttled run of the binder is throttled exactly like a scheduler's client.
type tokenBucket struct {
	mu     sync.Mutex
	qps    float64
	burst  float64
	tokens float64
	last   time.Time
}

func newTokenBucket(qps float64, burst int) *tokenBucket {
	if qps <= 0 {
		return nil
	}
	if burst < 1 {
		burst = 1
	}
	return &tokenBucket{qps: qps, burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

func (b *tokenBucket) wait() {
	if b == nil {
		return
	}
	b.mu.Lock()
	now := time.Now()
	b.tokens += now.Sub(b.last).Seconds() * b.qps
	if b.tokens > b.burst {
		b.tokens = b.burst
	}
	b.last = now
	b.tokens--
	deficit := -b.tokens
	b.mu.Unlock()
	if deficit > 0 {
		time.Sleep(time.Duration(deficit / b.qps * float64(time.Second)))
	}
}

type binder struct {
	cfg     config
	client  *http.Client
	limiter *tokenBucket
	nodes   []string
	next    atomic.Uint64
	queue   chan pod
	seenMu  sync.Mutex
	seen    map[string]bool
	bound   atomic.Int64
	failed  atomic.Int64
}

func (b *binder) request(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.cfg.server+path, reader)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.cfg.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.cfg.token)
	}
	return b.client.Do(req)
}

func (b *binder) getJSON(ctx context.Context, path string, into any) error {
	b.limiter.wait()
	resp, err := b.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusGone {
		return errGone
	}
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, text)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

func (b *binder) listNodes(ctx context.Context) error {
	query := url.Values{"limit": {"1000"}}
	if b.cfg.nodeSelector != "" {
		query.Set("labelSelector", b.cfg.nodeSelector)
	}
	for {
		var page nodeList
		if err := b.getJSON(ctx, "/api/v1/nodes?"+query.Encode(), &page); err != nil {
			return err
		}
		for _, item := range page.Items {
			b.nodes = append(b.nodes, item.Metadata.Name)
		}
		if page.Metadata.Continue == "" {
			break
		}
		query.Set("continue", page.Metadata.Continue)
	}
	if len(b.nodes) == 0 {
		return fmt.Errorf("no nodes match label selector %q: create nodes before starting the binder", b.cfg.nodeSelector)
	}
	// A stable order makes the round-robin placement reproducible between runs.
	sort.Strings(b.nodes)
	return nil
}

func (b *binder) pendingSelector() string {
	return "spec.nodeName=,spec.schedulerName=" + b.cfg.schedulerName
}

// enqueue hands a pending pod to the workers once, however many watch events name it.
// A gated pod or one being deleted is left alone, as a scheduler leaves it (the API server
// would refuse its binding anyway).
func (b *binder) enqueue(p pod) {
	if p.Spec.NodeName != "" || len(p.Spec.SchedulingGates) > 0 || p.Metadata.DeletionTimestamp != nil {
		return
	}
	b.seenMu.Lock()
	if b.seen[p.Metadata.UID] {
		b.seenMu.Unlock()
		return
	}
	b.seen[p.Metadata.UID] = true
	b.seenMu.Unlock()
	b.queue <- p
}

func (b *binder) listPending(ctx context.Context) (string, error) {
	query := url.Values{"limit": {"1000"}, "fieldSelector": {b.pendingSelector()}}
	var resourceVersion string
	for {
		var page podList
		if err := b.getJSON(ctx, "/api/v1/pods?"+query.Encode(), &page); err != nil {
			return "", err
		}
		if resourceVersion == "" {
			resourceVersion = page.Metadata.ResourceVersion
		}
		for _, item := range page.Items {
			b.enqueue(item)
		}
		if page.Metadata.Continue == "" {
			return resourceVersion, nil
		}
		query.Set("continue", page.Metadata.Continue)
	}
}

// watchPending streams pending pods from resourceVersion until the stream ends,
// returning the last resourceVersion seen so the caller can resume from it.
func (b *binder) watchPending(ctx context.Context, resourceVersion string) (string, error) {
	query := url.Values{
		"watch":               {"true"},
		"allowWatchBookmarks": {"true"},
		"resourceVersion":     {resourceVersion},
		"fieldSelector":       {b.pendingSelector()},
		"timeoutSeconds":      {"300"},
	}
	resp, err := b.request(ctx, http.MethodGet, "/api/v1/pods?"+query.Encode(), nil)
	if err != nil {
		return resourceVersion, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusGone {
		return resourceVersion, errGone
	}
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return resourceVersion, fmt.Errorf("watch pods: %s: %s", resp.Status, text)
	}
	decoder := json.NewDecoder(bufio.NewReaderSize(resp.Body, 1<<20))
	for {
		var event watchEvent
		if err := decoder.Decode(&event); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return resourceVersion, nil
			}
			return resourceVersion, err
		}
		if event.Type == "ERROR" {
			var status struct {
				Code int `json:"code"`
			}
			_ = json.Unmarshal(event.Object, &status)
			if status.Code == http.StatusGone {
				return resourceVersion, errGone
			}
			return resourceVersion, fmt.Errorf("watch pods: error event %s", event.Object)
		}
		var item pod
		if err := json.Unmarshal(event.Object, &item); err != nil {
			return resourceVersion, err
		}
		resourceVersion = item.Metadata.ResourceVersion
		if event.Type == "ADDED" || event.Type == "MODIFIED" {
			b.enqueue(item)
		}
	}
}

func (b *binder) informer(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		resourceVersion, err := b.listPending(ctx)
		for err == nil && ctx.Err() == nil {
			resourceVersion, err = b.watchPending(ctx, resourceVersion)
		}
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, errGone) {
			fmt.Fprintf(os.Stderr, "rawbinder: %v; relisting in %s\n", err, backoff)
			time.Sleep(backoff)
			backoff = min(backoff*2, 5*time.Second)
		}
	}
}

func (b *binder) bind(ctx context.Context, p pod) {
	node := b.nodes[(b.next.Add(1)-1)%uint64(len(b.nodes))]
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "Binding",
		"metadata":   map[string]string{"name": p.Metadata.Name, "namespace": p.Metadata.Namespace, "uid": p.Metadata.UID},
		"target":     map[string]string{"apiVersion": "v1", "kind": "Node", "name": node},
	})
	path := "/api/v1/namespaces/" + p.Metadata.Namespace + "/pods/" + p.Metadata.Name + "/binding"
	for attempt := 1; ; attempt++ {
		b.limiter.wait()
		resp, err := b.request(ctx, http.MethodPost, path, body)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK:
				b.bound.Add(1)
				return
			case resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusNotFound:
				// Already bound or deleted: nothing left to do for this pod.
				b.failed.Add(1)
				return
			}
			err = fmt.Errorf("bind %s/%s: %s", p.Metadata.Namespace, p.Metadata.Name, resp.Status)
		}
		if ctx.Err() != nil {
			return
		}
		if attempt == 5 {
			fmt.Fprintf(os.Stderr, "rawbinder: giving up: %v\n", err)
			b.failed.Add(1)
			return
		}
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
}

func newClient(cfg config) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.caFile != "" {
		pem, err := os.ReadFile(cfg.caFile)
		if err != nil {
			return nil, fmt.Errorf("read -ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca %s holds no PEM certificate", cfg.caFile)
		}
		tlsConfig.RootCAs = pool
	}
	if cfg.certFile != "" || cfg.keyFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.certFile, cfg.keyFile)
		if err != nil {
			return nil, fmt.Errorf("load -cert/-key: %w", err)
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	transport := &http.Transport{
		TLSClientConfig:     tlsConfig,
		ForceAttemptHTTP2:   true, // as client-go does: one multiplexed connection
		MaxIdleConnsPerHost: cfg.concurrency,
		IdleConnTimeout:     90 * time.Second,
	}
	return &http.Client{Transport: transport}, nil
}

func parseFlags() config {
	var cfg config
	flag.StringVar(&cfg.server, "server", "", "API server URL, e.g. https://127.0.0.1:6443 (required)")
	flag.StringVar(&cfg.caFile, "ca", "", "PEM file of the CA that signed the API server's certificate")
	flag.StringVar(&cfg.certFile, "cert", "", "PEM client certificate")
	flag.StringVar(&cfg.keyFile, "key", "", "PEM client key")
	flag.StringVar(&cfg.token, "token", "", "bearer token, instead of a client certificate")
	flag.StringVar(&cfg.schedulerName, "scheduler-name", "", "bind pending pods with this spec.schedulerName (required)")
	flag.StringVar(&cfg.nodeSelector, "node-selector", "", "label selector of the nodes to bind to (default: all nodes)")
	flag.IntVar(&cfg.concurrency, "concurrency", 16, "bindings in flight at once (past a few dozen they only contend inside the API server)")
	flag.Float64Var(&cfg.qps, "qps", 0, "client-side rate limit in requests per second (0: unthrottled)")
	flag.IntVar(&cfg.burst, "burst", 0, "client-side rate limit burst")
	flag.Parse()
	if cfg.server == "" || cfg.schedulerName == "" {
		fmt.Fprintln(os.Stderr, "rawbinder: -server and -scheduler-name are required")
		os.Exit(2)
	}
	if cfg.concurrency < 1 {
		fmt.Fprintln(os.Stderr, "rawbinder: -concurrency must be at least 1")
		os.Exit(2)
	}
	return cfg
}

func main() {
	cfg := parseFlags()
	client, err := newClient(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rawbinder: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	b := &binder{
		cfg:     cfg,
		client:  client,
		limiter: newTokenBucket(cfg.qps, cfg.burst),
		queue:   make(chan pod, 1<<16),
		seen:    map[string]bool{},
	}
	if err := b.listNodes(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "rawbinder: list nodes: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "rawbinder: binding pods of %q round-robin to %d nodes, %d in flight\n",
		cfg.schedulerName, len(b.nodes), cfg.concurrency)
	var workers sync.WaitGroup
	for range cfg.concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case p := <-b.queue:
					b.bind(ctx, p)
				}
			}
		}()
	}
	b.informer(ctx)
	workers.Wait()
	fmt.Fprintf(os.Stderr, "rawbinder: bound %d pods, %d failed\n", b.bound.Load(), b.failed.Load())
}
