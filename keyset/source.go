package keyset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/jws"
)

// Defaults of Config's zero values.
const (
	DefaultTimeout    = 10 * time.Second
	DefaultMaxSize    = 256 << 10 // octets of one document
	DefaultMinRefresh = time.Minute
	DefaultMaxRefresh = time.Hour
	DefaultGrace      = time.Hour
	DefaultMaxStale   = 24 * time.Hour
	// DefaultInterval is a set's lifetime when its response gives none.
	DefaultInterval = 15 * time.Minute
)

// ErrConfig is returned by New for a configuration it cannot use.
var ErrConfig = errors.New("keyset: bad configuration")

// Endpoint is where one agent publishes its JWK Set.
type Endpoint struct {
	// URL is the JWK Set's absolute http or https URL.
	URL string
	// Alg, when not empty, pins every key of the set: a key without "alg"
	// takes it, a key naming another alg refuses the document (HC-22).
	Alg string
}

// Config configures a Source. At least one of Agents and Document is
// required.
type Config struct {
	// Agents maps each AgentID to the URL of its JWK Set. An agent given
	// here takes its keys from its own URL only, even when Document or
	// Base names it too.
	Agents map[handoff.AgentID]Endpoint
	// Document is the URL of a whole trust document, AgentID -> JWK Set,
	// as ParseTrust reads it. It gives the keys of the agents that
	// neither Agents nor Base names.
	Document string
	// Base, when not nil, holds keys configured locally, for the agents
	// that Agents does not name: for them, Base overrides the Document.
	Base *handoff.Trust

	// Client makes the requests; nil means a client with Timeout. Its
	// CheckRedirect is replaced: redirects are always refused.
	Client *http.Client
	// Timeout bounds each request, body included (DefaultTimeout).
	Timeout time.Duration
	// MaxSize bounds each document, in octets (DefaultMaxSize).
	MaxSize int64
	// MinRefresh is the floor of the refresh interval, the least time
	// between two refreshes of one URL that messages with unknown kids
	// cause, and the delay before retrying a failed refresh
	// (DefaultMinRefresh).
	MinRefresh time.Duration
	// MaxRefresh is the ceiling of the refresh interval (DefaultMaxRefresh).
	MaxRefresh time.Duration
	// Grace is how long a key stays trusted after it disappears from its
	// agent's set (DefaultGrace). Negative means not at all.
	Grace time.Duration
	// MaxStale is how long an agent's last good set is used when no
	// refresh succeeds; then its keys are withheld (DefaultMaxStale).
	MaxStale time.Duration
	// AllowHTTP allows plain http URLs to hosts other than loopback
	// addresses: anyone on the path could then replace the keys.
	AllowHTTP bool
	// UserAgent is sent with each request; empty sends "handoff-keyset".
	UserAgent string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logger hears of changes, refused documents and failed refreshes;
	// nil is silent.
	Logger *slog.Logger
	// State, when not nil, is what Source.State returned: the sets it
	// holds for configured URLs are validated again and used until they
	// are due, so a new process need not fetch them again.
	State []byte
}

// Source follows the configured URLs and keeps a trust configuration
// built from them. It is safe for concurrent use.
type Source struct {
	cfg    Config
	client *http.Client
	now    func() time.Time
	log    *slog.Logger
	eps    []*endpoint // the Agents, sorted by AgentID, then the Document
	byID   map[handoff.AgentID]*endpoint
	doc    *endpoint

	// after is the timer Run waits on (tests replace it).
	after func(time.Duration) <-chan time.Time

	mu      sync.Mutex
	sinks   []func(*handoff.Trust) error
	print   string // what the published trust binds, to publish changes only
	pending []note // log records made under mu, emitted by flush

	trust    atomic.Pointer[handoff.Trust]
	gen      atomic.Uint64 // bumped with each new trust
	applying atomic.Bool
	dirty    atomic.Bool
	kick     chan struct{}
	bg       sync.WaitGroup
	ctx      context.Context
	stop     context.CancelFunc

	fetches atomic.Int64 // requests made
	parses  atomic.Int64 // documents parsed
}

// endpoint is one URL and what is known of it. Its fields are guarded by
// Source.mu.
type endpoint struct {
	url   string
	agent handoff.AgentID // "" for the Document
	alg   string

	keys    map[handoff.AgentID][]handoff.TrustedKey // the last good set
	body    []byte                                   // its octets
	etag    string
	good    time.Time // the last successful refresh (200 or 304)
	due     time.Time // the next refresh
	tried   time.Time // the last refresh started
	busy    bool      // a refresh is running
	lastErr string
	retired map[handoff.AgentID][]retiredKey
}

// retiredKey is a key that disappeared from its set at gone.
type retiredKey struct {
	key  handoff.TrustedKey
	id   string
	gone time.Time
}

// New validates cfg and returns a Source holding what cfg.State holds.
// Nothing is fetched until Update or Run.
func New(cfg Config) (*Source, error) {
	if len(cfg.Agents) == 0 && cfg.Document == "" {
		return nil, fmt.Errorf("%w: no agent URL and no document URL", ErrConfig)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.Timeout, DefaultTimeout)
	def(&cfg.MinRefresh, DefaultMinRefresh)
	def(&cfg.MaxRefresh, DefaultMaxRefresh)
	def(&cfg.Grace, DefaultGrace)
	def(&cfg.MaxStale, DefaultMaxStale)
	if cfg.MaxSize == 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	switch {
	case cfg.Timeout < 0, cfg.MinRefresh < 0, cfg.MaxRefresh < 0, cfg.MaxStale < 0, cfg.MaxSize < 0:
		return nil, fmt.Errorf("%w: negative duration or size", ErrConfig)
	case cfg.MaxRefresh < cfg.MinRefresh:
		return nil, fmt.Errorf("%w: MaxRefresh %s is below MinRefresh %s", ErrConfig, cfg.MaxRefresh, cfg.MinRefresh)
	}
	if cfg.Grace < 0 {
		cfg.Grace = 0
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "handoff-keyset"
	}
	s := &Source{cfg: cfg, now: cfg.Now, log: cfg.Logger, byID: map[handoff.AgentID]*endpoint{},
		after: time.After, kick: make(chan struct{}, 1)}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var c http.Client
	if cfg.Client != nil {
		c = *cfg.Client
	} else {
		c.Timeout = cfg.Timeout
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s.client = &c
	ids := make([]handoff.AgentID, 0, len(cfg.Agents))
	for id := range cfg.Agents {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		ep := cfg.Agents[id]
		if id == "" {
			return nil, fmt.Errorf("%w: empty AgentID", ErrConfig)
		}
		if err := checkURL(ep.URL, cfg.AllowHTTP); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrConfig, id, err)
		}
		if ep.Alg != "" {
			if _, err := ParseJWKSet([]byte(`{"keys":[]}`), ep.Alg); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrConfig, id, err)
			}
		}
		e := &endpoint{url: ep.URL, agent: id, alg: ep.Alg}
		s.eps = append(s.eps, e)
		s.byID[id] = e
	}
	if cfg.Document != "" {
		if err := checkURL(cfg.Document, cfg.AllowHTTP); err != nil {
			return nil, fmt.Errorf("%w: document: %w", ErrConfig, err)
		}
		s.doc = &endpoint{url: cfg.Document}
		s.eps = append(s.eps, s.doc)
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	if cfg.State != nil {
		if err := s.restore(cfg.State); err != nil {
			s.log.Warn("keyset: cached state not used", "err", err)
		}
		s.flush()
	}
	s.mu.Lock()
	t, print := s.build(s.now())
	s.print = print
	s.mu.Unlock()
	s.flush()
	s.trust.Store(t)
	return s, nil
}

// checkURL accepts an absolute https URL, or http to a loopback host (or
// any host with allowHTTP).
func checkURL(raw string, allowHTTP bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("URL %q: %v", raw, err)
	}
	switch {
	case u.Host == "" || !u.IsAbs():
		return fmt.Errorf("URL %q: want an absolute URL", raw)
	case u.User != nil:
		return fmt.Errorf("URL %q: credentials in a URL are refused", raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && (allowHTTP || loopback(u.Hostname())):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("URL %q: plain http to a host that is not loopback (Config.AllowHTTP)", raw)
	}
	return fmt.Errorf("URL %q: want http or https", raw)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Trust returns the current trust configuration.
func (s *Source) Trust() *handoff.Trust { return s.trust.Load() }

// Follow makes set receive every new trust configuration, starting with
// the current one, whose error it returns; agent.SetTrust is the usual
// set. Later errors are logged. set is never called under a lock of the
// Source, and calls to it do not overlap.
func (s *Source) Follow(set func(*handoff.Trust) error) error {
	if set == nil {
		return fmt.Errorf("%w: nil Follow function", ErrConfig)
	}
	if err := set(s.trust.Load()); err != nil {
		return err
	}
	s.mu.Lock()
	s.sinks = append(s.sinks, set)
	s.mu.Unlock()
	s.publish()
	return nil
}

// Update refreshes, side by side, every URL whose refresh is due (every
// URL not yet fetched), applies what time has changed (grace periods
// ended, staleness bounds passed), and returns the refreshes' errors
// joined. A failed refresh keeps the last good set. A refresh that a
// message's unknown kid started and that is still running is not waited
// for.
func (s *Source) Update(ctx context.Context) error {
	errs := make([]error, len(s.eps))
	var wg sync.WaitGroup
	for i, ep := range s.eps {
		s.mu.Lock()
		due := !ep.busy && !s.now().Before(ep.due)
		if due {
			ep.busy, ep.tried = true, s.now()
		}
		s.mu.Unlock()
		if due {
			wg.Go(func() { errs[i] = s.refresh(ctx, ep) })
		}
	}
	wg.Wait()
	s.rebuild()
	return errors.Join(errs...)
}

// Run keeps the trust configuration current until ctx ends: it refreshes
// each URL when it is due, and rebuilds the configuration when a grace
// period ends or a staleness bound passes. It returns ctx's error.
func (s *Source) Run(ctx context.Context) error {
	for {
		s.Update(ctx)
		wait := s.nextWake().Sub(s.now())
		if wait < 0 {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.after(wait):
		case <-s.kick:
		}
	}
}

// Close stops the refreshes that messages with unknown kids started and
// waits for them.
func (s *Source) Close() {
	s.stop()
	s.bg.Wait()
}

// unknown is the Trust's OnUnknownKey hook: a message's kid names no key of
// iss. It starts a refresh of the URL that covers iss unless one ran within
// MinRefresh; it never blocks, and iss and kid select nothing but that URL.
func (s *Source) unknown(iss handoff.AgentID, kid string) {
	ep := s.byID[iss]
	if ep == nil {
		ep = s.doc
	}
	if ep == nil {
		return
	}
	s.mu.Lock()
	now := s.now()
	if ep.busy || (!ep.tried.IsZero() && now.Before(ep.tried.Add(s.cfg.MinRefresh))) || s.ctx.Err() != nil {
		s.mu.Unlock()
		return
	}
	ep.busy, ep.tried = true, now
	s.bg.Add(1)
	s.mu.Unlock()
	s.log.Info("keyset: refreshing for an unknown key", "agent", string(iss), "url", ep.url)
	go func() {
		defer s.bg.Done()
		s.refresh(s.ctx, ep)
		s.rebuild()
		select { // Run recomputes its next wake
		case s.kick <- struct{}{}:
		default:
		}
	}()
}

// refresh fetches ep, which the caller marked busy, and records the
// outcome.
func (s *Source) refresh(ctx context.Context, ep *endpoint) error {
	s.mu.Lock()
	etag := ""
	if ep.body != nil {
		etag = ep.etag
	}
	s.mu.Unlock()
	res, err := s.fetch(ctx, ep, etag)
	if err != nil && ctx.Err() != nil {
		// The caller stopped (Run's context canceled at shutdown): the key
		// server did not fail, so nothing is recorded or logged, and the
		// endpoint stays due as it was.
		s.mu.Lock()
		ep.busy = false
		s.mu.Unlock()
		return ctx.Err()
	}
	err = s.record(ep, res, err)
	s.flush()
	return err
}

// record notes the outcome of a refresh of ep.
func (s *Source) record(ep *endpoint, res *fetched, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ep.busy = false
	now := s.now()
	if err != nil {
		ep.lastErr = err.Error()
		ep.due = now.Add(s.cfg.MinRefresh)
		s.note(slog.LevelWarn, "keyset: refresh failed; the last good set is kept", "url", ep.url, "err", err)
		return fmt.Errorf("keyset: %s: %w", ep.url, err)
	}
	ep.lastErr = ""
	ep.good = now
	ep.due = now.Add(s.early(s.lifetime(res.header, now)))
	if res.notModified {
		s.note(slog.LevelDebug, "keyset: not modified", "url", ep.url)
		return nil
	}
	s.install(ep, res.keys, now)
	ep.body, ep.etag = res.body, res.header.Get("ETag")
	return nil
}

type fetched struct {
	header      http.Header
	notModified bool
	body        []byte
	keys        map[handoff.AgentID][]handoff.TrustedKey
}

// fetch makes one conditional GET of ep and validates what it returns.
func (s *Source) fetch(ctx context.Context, ep *endpoint, etag string) (*fetched, error) {
	if s.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	req.Header.Set("User-Agent", s.cfg.UserAgent)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	s.fetches.Add(1)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && etag != "":
		return &fetched{header: resp.Header, notModified: true}, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, fmt.Errorf("HTTP %d: redirects are refused", resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	case resp.ContentLength > s.cfg.MaxSize:
		return nil, fmt.Errorf("document of %d octets, more than %d", resp.ContentLength, s.cfg.MaxSize)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxSize+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > s.cfg.MaxSize {
		return nil, fmt.Errorf("document of more than %d octets", s.cfg.MaxSize)
	}
	keys, err := s.parse(ep, body)
	if err != nil {
		return nil, fmt.Errorf("document refused: %w", err)
	}
	return &fetched{header: resp.Header, body: body, keys: keys}, nil
}

// parse validates a document of ep as ParseTrust and
// ParseJWKSet do.
func (s *Source) parse(ep *endpoint, body []byte) (map[handoff.AgentID][]handoff.TrustedKey, error) {
	s.parses.Add(1)
	if ep.agent != "" {
		ks, err := ParseJWKSet(body, ep.alg)
		if err != nil {
			return nil, err
		}
		return map[handoff.AgentID][]handoff.TrustedKey{ep.agent: ks}, nil
	}
	t, err := ParseTrust(body)
	if err != nil {
		return nil, err
	}
	m := map[handoff.AgentID][]handoff.TrustedKey{}
	for _, id := range t.AgentIDs() {
		m[id] = t.Keys(id)
	}
	return m, nil
}

// install makes keys ep's set: a key that left it is retired at now, a
// key that came back is no longer retired.
func (s *Source) install(ep *endpoint, keys map[handoff.AgentID][]handoff.TrustedKey, now time.Time) {
	if ep.retired == nil {
		ep.retired = map[handoff.AgentID][]retiredKey{}
	}
	for id, old := range ep.keys {
		for _, k := range old {
			kid := keyID(k)
			if !slices.ContainsFunc(keys[id], func(n handoff.TrustedKey) bool { return keyID(n) == kid }) &&
				!slices.ContainsFunc(ep.retired[id], func(r retiredKey) bool { return r.id == kid }) {
				ep.retired[id] = append(ep.retired[id], retiredKey{key: k, id: kid, gone: now})
				s.note(slog.LevelInfo, "keyset: key retired", "agent", string(id), "kid", k.KID, "url", ep.url, "trusted_until", now.Add(s.cfg.Grace))
			}
		}
	}
	for id, ks := range keys {
		for _, k := range ks {
			kid := keyID(k)
			if !slices.ContainsFunc(ep.keys[id], func(o handoff.TrustedKey) bool { return keyID(o) == kid }) {
				s.note(slog.LevelInfo, "keyset: key added", "agent", string(id), "kid", k.KID, "url", ep.url)
			}
			ep.retired[id] = slices.DeleteFunc(ep.retired[id], func(r retiredKey) bool { return r.id == kid })
		}
	}
	ep.keys = keys
}

// keyID names a key by its RFC 7638 thumbprint and its alg: what makes
// it the same key for the same algorithm, whatever its kid.
func keyID(k handoff.TrustedKey) string {
	th, _ := jws.Thumbprint(k.Public)
	return th + " " + k.Alg
}

// early is when, into a set's lifetime l, its refresh starts: at nine
// tenths of it, so that the next set is in before this one expires, and
// never sooner than MinRefresh.
func (s *Source) early(l time.Duration) time.Duration {
	return max(l-l/10, min(s.cfg.MinRefresh, l))
}

// lifetime is how long a response stays fresh (RFC 9111 section 4.2.1),
// clamped to [MinRefresh, MaxRefresh].
func (s *Source) lifetime(h http.Header, now time.Time) time.Duration {
	d, ok := freshness(h, now)
	if !ok {
		d = DefaultInterval
	}
	return min(max(d, s.cfg.MinRefresh), s.cfg.MaxRefresh)
}

// freshness reads a response's remaining freshness lifetime: max-age less
// Age, else Expires less Date. no-cache and no-store give none.
func freshness(h http.Header, now time.Time) (time.Duration, bool) {
	var maxAge = -1
	for _, line := range h.Values("Cache-Control") {
		for _, dir := range strings.Split(line, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(dir), "=")
			switch strings.ToLower(name) {
			case "no-cache", "no-store":
				return 0, true
			case "max-age":
				if n, err := strconv.ParseUint(strings.Trim(val, `"`), 10, 31); err == nil {
					maxAge = int(n)
				}
			}
		}
	}
	age := time.Duration(0)
	if n, err := strconv.ParseUint(h.Get("Age"), 10, 31); err == nil {
		age = time.Duration(n) * time.Second
	}
	if maxAge >= 0 {
		return max(time.Duration(maxAge)*time.Second-age, 0), true
	}
	if e := h.Get("Expires"); e != "" {
		exp, err := http.ParseTime(e)
		if err != nil {
			return 0, true // an invalid Expires means already expired (RFC 9111 section 5.3)
		}
		date := now
		if d, err := http.ParseTime(h.Get("Date")); err == nil {
			date = d
		}
		return max(exp.Sub(date)-age, 0), true
	}
	return 0, false
}

// rebuild builds the trust configuration from what the endpoints hold now
// and publishes it when it binds something new.
func (s *Source) rebuild() {
	s.mu.Lock()
	now := s.now()
	for _, ep := range s.eps { // forget the keys whose grace has ended
		for id, rs := range ep.retired {
			ep.retired[id] = slices.DeleteFunc(rs, func(r retiredKey) bool { return !now.Before(r.gone.Add(s.cfg.Grace)) })
			if len(ep.retired[id]) == 0 {
				delete(ep.retired, id)
			}
		}
	}
	t, print := s.build(now)
	changed := print != s.print
	if changed {
		s.print = print
		s.trust.Store(t)
		s.gen.Add(1)
	}
	s.mu.Unlock()
	s.flush()
	if changed {
		s.publish()
	}
}

// build makes the trust configuration at now, with a print of what it
// binds. The caller holds s.mu.
func (s *Source) build(now time.Time) (*handoff.Trust, string) {
	keys := map[handoff.AgentID][]handoff.TrustedKey{}
	withheld := map[handoff.AgentID]string{}
	covered := map[handoff.AgentID]bool{}
	if s.cfg.Base != nil {
		for _, id := range s.cfg.Base.AgentIDs() {
			keys[id] = s.cfg.Base.Keys(id)
		}
	}
	add := func(ep *endpoint, id handoff.AgentID) {
		covered[id] = true
		delete(keys, id)
		switch {
		case ep.good.IsZero():
			why := fmt.Sprintf("no JWK Set fetched yet from %s", ep.url)
			if ep.lastErr != "" {
				why += ": " + ep.lastErr
			}
			withheld[id] = why
			return
		case now.Sub(ep.good) > s.cfg.MaxStale:
			why := fmt.Sprintf("the keys of %q are stale: no successful refresh of %s since %s (max-stale %s)",
				id, ep.url, ep.good.UTC().Format(time.RFC3339), s.cfg.MaxStale)
			if ep.lastErr != "" {
				why += "; last error: " + ep.lastErr
			}
			withheld[id] = why
			return
		}
		ks := slices.Clone(ep.keys[id])
		for _, r := range ep.retired[id] {
			if now.Before(r.gone.Add(s.cfg.Grace)) {
				ks = append(ks, r.key)
			}
		}
		if len(ks) == 0 {
			withheld[id] = fmt.Sprintf("the JWK Set at %s holds no key for it", ep.url)
			return
		}
		keys[id] = ks
	}
	if s.doc != nil {
		var ids []handoff.AgentID
		for id := range s.doc.keys {
			ids = append(ids, id)
		}
		for id := range s.doc.retired {
			if _, ok := s.doc.keys[id]; !ok {
				ids = append(ids, id)
			}
		}
		for _, id := range ids {
			if s.byID[id] == nil && (s.cfg.Base == nil || len(s.cfg.Base.Keys(id)) == 0) {
				add(s.doc, id)
			}
		}
	}
	for _, ep := range s.eps {
		if ep.agent != "" {
			add(ep, ep.agent)
		}
	}
	t, err := handoff.NewTrust(keys)
	if err != nil {
		// Unreachable: every key was validated when its document was read.
		s.note(slog.LevelError, "keyset: trust configuration not built", "err", err)
		t, _ = handoff.NewTrust(nil)
	}
	var b strings.Builder
	for _, id := range t.AgentIDs() {
		fmt.Fprintf(&b, "%s:", id)
		names := []string{}
		for _, k := range t.Keys(id) {
			names = append(names, keyID(k)+" "+k.KID)
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "%s\n", strings.Join(names, ","))
	}
	wids := make([]string, 0, len(withheld))
	for id, why := range withheld {
		wids = append(wids, string(id)+"!"+why)
	}
	sort.Strings(wids)
	b.WriteString(strings.Join(wids, "\n"))
	return t.Withhold(withheld).OnUnknownKey(s.unknown), b.String()
}

// nextWake is the next time Run has work: a refresh due, a grace period
// ending, a staleness bound passing.
func (s *Source) nextWake() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	next := now.Add(s.cfg.MaxRefresh)
	soonest := func(t time.Time) {
		if t.After(now) && t.Before(next) {
			next = t
		}
	}
	for _, ep := range s.eps {
		if !ep.busy {
			if !ep.due.After(now) {
				return now
			}
			soonest(ep.due)
		}
		if !ep.good.IsZero() {
			soonest(ep.good.Add(s.cfg.MaxStale + time.Nanosecond))
		}
		for _, rs := range ep.retired {
			for _, r := range rs {
				soonest(r.gone.Add(s.cfg.Grace))
			}
		}
	}
	return next
}

// note is a log record made while s.mu is held.
type note struct {
	level slog.Level
	msg   string
	args  []any
}

// note queues a log record; the caller holds s.mu. The Logger is the
// caller's code and never runs under the lock: flush emits the records.
func (s *Source) note(level slog.Level, msg string, args ...any) {
	s.pending = append(s.pending, note{level: level, msg: msg, args: args})
}

func (s *Source) flush() {
	s.mu.Lock()
	ns := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, n := range ns {
		s.log.Log(context.Background(), n.level, n.msg, n.args...)
	}
}

// publish hands the current trust configuration to every Follow function.
// One goroutine at a time does it, without a lock held, and it ends only
// once the last configuration built has been handed out.
func (s *Source) publish() {
	s.dirty.Store(true)
	for s.applying.CompareAndSwap(false, true) {
		s.dirty.Store(false)
		t := s.trust.Load()
		s.mu.Lock()
		sinks := slices.Clone(s.sinks)
		s.mu.Unlock()
		for _, set := range sinks {
			if err := set(t); err != nil {
				s.log.Error("keyset: trust configuration not applied", "err", err)
			}
		}
		s.applying.Store(false)
		if !s.dirty.Load() {
			return
		}
	}
}
