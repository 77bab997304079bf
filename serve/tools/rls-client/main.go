// rls-client asks an Envoy rate-limit service (envoy.service.ratelimit.v3) through the stubs
// that envoyproxy/go-control-plane generates from Envoy's own protos, so rl's tests and
// benchmark talk to `rl serve --grpc` the way Envoy does, with code nobody on rl wrote for
// the wire format.
//
//	rls-client check -addr HOST:PORT -domain D [-hits N] -d 'k=v,k=v[;hits=N]' ...
//	    one request; prints the response as one protojson line (`-d ''` is a descriptor
//	    with no entries); an error status exits 1 with `rls-client: <status>` on stderr
//	rls-client pace  -addr ... -domain D -d ... [-hits N] -rate R -count N
//	    N requests, one at a time at R/s; one JSON line per request with the
//	    client's send/receive times (unix ns) and the overall code
//	rls-client load  -addr ... -domain D -d ... -c C -duration D [-start-phase F -window W]
//	    C concurrent callers for D; one JSON summary line: decisions/s, latency
//	    percentiles and the most admitted in any sliding window W
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// descriptors collects repeated -d flags: `k=v,k=v` with an optional `;hits=N`.
type descriptors []*common.RateLimitDescriptor

func (d *descriptors) String() string { return fmt.Sprint(len(*d)) }

func (d *descriptors) Set(arg string) error {
	body, hits, hasHits := strings.Cut(arg, ";hits=")
	desc := &common.RateLimitDescriptor{}
	if body == "" {
		// `-d ''`: a descriptor with no entries (to test that the service refuses it).
		*d = append(*d, desc)
		return nil
	}
	for _, pair := range strings.Split(body, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return errors.New("descriptor entries are key=value")
		}
		desc.Entries = append(desc.Entries, &common.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	if hasHits {
		n, err := strconv.ParseUint(hits, 10, 64)
		if err != nil {
			return err
		}
		desc.HitsAddend = wrapperspb.UInt64(n)
	}
	*d = append(*d, desc)
	return nil
}

type query struct {
	addr   string
	domain string
	hits   uint
	descs  descriptors
}

func register(fs *flag.FlagSet) *query {
	c := &query{}
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8081", "rate-limit service host:port")
	fs.StringVar(&c.domain, "domain", "", "rate limit domain")
	fs.UintVar(&c.hits, "hits", 0, "request hits_addend (0 = unset, which means 1)")
	fs.Var(&c.descs, "d", "descriptor k=v,k=v[;hits=N] (repeatable)")
	return c
}

func (c *query) request() *rls.RateLimitRequest {
	return &rls.RateLimitRequest{Domain: c.domain, Descriptors: c.descs, HitsAddend: uint32(c.hits)}
}

func dial(addr string) (rls.RateLimitServiceClient, *grpc.ClientConn) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(err)
	}
	return rls.NewRateLimitServiceClient(conn), conn
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rls-client:", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: rls-client check|pace|load [flags]"))
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	c := register(fs)
	switch os.Args[1] {
	case "check":
		fs.Parse(os.Args[2:])
		check(c)
	case "pace":
		rate := fs.Float64("rate", 100, "requests per second")
		count := fs.Int("count", 100, "requests")
		fs.Parse(os.Args[2:])
		pace(c, *rate, *count)
	case "load":
		conc := fs.Int("c", 16, "concurrent callers")
		dur := fs.Duration("duration", 5*time.Second, "how long")
		phase := fs.Float64("start-phase", -1, "start at this fraction of a -window (wall clock), e.g. 0.9; <0 starts now")
		window := fs.Duration("window", time.Second, "sliding window for the most admitted")
		conns := fs.Int("conns", 1, "HTTP/2 connections shared by the callers")
		fs.Parse(os.Args[2:])
		load(c, *conc, *conns, *dur, *phase, *window)
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}

func check(c *query) {
	client, conn := dial(c.addr)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.ShouldRateLimit(ctx, c.request())
	if err != nil {
		fail(err)
	}
	out, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(resp)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(out))
}

type paced struct {
	SendNs int64  `json:"send_ns"`
	RecvNs int64  `json:"recv_ns"`
	Code   string `json:"code"`
}

func pace(c *query, rate float64, count int) {
	client, conn := dial(c.addr)
	defer conn.Close()
	req := c.request()
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	enc := json.NewEncoder(os.Stdout)
	for i := 0; i < count; i++ {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		send := time.Now()
		resp, err := client.ShouldRateLimit(ctx, req)
		recv := time.Now()
		cancel()
		if err != nil {
			fail(err)
		}
		enc.Encode(paced{send.UnixNano(), recv.UnixNano(), resp.OverallCode.String()})
	}
}

type sample struct {
	send, recv int64
	ok         bool
}

type summary struct {
	Requests     int     `json:"requests"`
	Admitted     int     `json:"admitted"`
	Denied       int     `json:"denied"`
	Errors       int     `json:"errors"`
	Seconds      float64 `json:"seconds"`
	DecisionsPS  float64 `json:"decisions_per_s"`
	P50Us        float64 `json:"p50_us"`
	P99Us        float64 `json:"p99_us"`
	MaxUs        float64 `json:"max_us"`
	WindowMs     int64   `json:"window_ms"`
	MostInWindow int     `json:"most_admitted_in_any_window"`
}

func load(c *query, conc, nconns int, dur time.Duration, phase float64, window time.Duration) {
	clients := make([]rls.RateLimitServiceClient, nconns)
	for i := range clients {
		client, conn := dial(c.addr)
		defer conn.Close()
		clients[i] = client
		// Connect before the clock starts.
		client.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{
			Domain: "rls-client-warmup",
			Descriptors: []*common.RateLimitDescriptor{{
				Entries: []*common.RateLimitDescriptor_Entry{{Key: "warmup", Value: "1"}},
			}},
		})
	}
	if phase >= 0 {
		w := window.Nanoseconds()
		now := time.Now().UnixNano()
		target := (now/w)*w + int64(phase*float64(w))
		if target <= now {
			target += w
		}
		time.Sleep(time.Duration(target - now))
	}
	req := c.request()
	deadline := time.Now().Add(dur)
	results := make([][]sample, conc)
	errs := make([]int, conc)
	var wg sync.WaitGroup
	begin := time.Now()
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			client := clients[g%nconns]
			for time.Now().Before(deadline) {
				send := time.Now()
				resp, err := client.ShouldRateLimit(context.Background(), req)
				recv := time.Now()
				if err != nil {
					errs[g]++
					continue
				}
				ok := resp.OverallCode == rls.RateLimitResponse_OK
				results[g] = append(results[g], sample{send.UnixNano(), recv.UnixNano(), ok})
			}
		}(g)
	}
	wg.Wait()
	elapsed := time.Since(begin).Seconds()
	var all []sample
	s := summary{Seconds: elapsed, WindowMs: window.Milliseconds()}
	for g := range results {
		all = append(all, results[g]...)
		s.Errors += errs[g]
	}
	lat := make([]float64, len(all))
	for i, x := range all {
		lat[i] = float64(x.recv-x.send) / 1e3
		if x.ok {
			s.Admitted++
		} else {
			s.Denied++
		}
	}
	s.Requests = len(all)
	s.DecisionsPS = float64(len(all)) / elapsed
	sort.Float64s(lat)
	if len(lat) > 0 {
		s.P50Us = lat[len(lat)/2]
		s.P99Us = lat[len(lat)*99/100]
		s.MaxUs = lat[len(lat)-1]
	}
	s.MostInWindow = mostInWindow(all, window.Nanoseconds())
	json.NewEncoder(os.Stdout).Encode(s)
}

// mostInWindow is the most admitted requests that certainly fell inside one window: those
// sent at or after an admitted request's send time and answered before that time plus the
// window. The server decided each between its send and its receive, so this never counts a
// pair the server could have seen a full window apart: a lower bound on the true most.
func mostInWindow(all []sample, w int64) int {
	var ok []sample
	for _, x := range all {
		if x.ok {
			ok = append(ok, x)
		}
	}
	sort.Slice(ok, func(i, j int) bool { return ok[i].send < ok[j].send })
	var maxLat int64
	for _, x := range ok {
		maxLat = max(maxLat, x.recv-x.send)
	}
	best, r := 0, 0
	for i := range ok {
		end := ok[i].send + w
		for r < len(ok) && ok[r].send < end {
			r++
		}
		// ok[i:r] were sent inside the window; drop those answered after it closed, which
		// can only be among the last sent (no answer took longer than maxLat).
		n := r - i
		for j := r - 1; j >= i && ok[j].send >= end-maxLat; j-- {
			if ok[j].recv >= end {
				n--
			}
		}
		best = max(best, n)
	}
	return best
}
