package keyset

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentproto/handoff"
)

// DefaultMaxAge is the lifetime a Publisher announces when
// PublisherConfig.MaxAge is zero.
const DefaultMaxAge = 5 * time.Minute

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// MaxAge is the Cache-Control max-age of each response (DefaultMaxAge):
	// how long a peer may go without asking again. A rotation publishes the
	// new key at least this long before signing with it.
	MaxAge time.Duration
	// OnServe, when not nil, is called after each GET is answered, with the
	// request and the ETag of the set it was answered for (a 304 included),
	// for example to see which peers have fetched a new set. It is called
	// without a lock held.
	OnServe func(r *http.Request, etag string)
}

// Publisher is an http.Handler that serves an agent's public keys as a
// JWK Set (RFC 7517 section 5, media type application/jwk-set+json), with
// Cache-Control max-age, a strong ETag and If-None-Match answered by 304,
// as a Source reads them. It answers GET and HEAD; it is safe for
// concurrent use, and Set changes the keys while it serves.
type Publisher struct {
	cfg  PublisherConfig
	mu   sync.RWMutex
	body []byte
	etag string
}

// NewPublisher returns a Publisher serving keys.
func NewPublisher(cfg PublisherConfig, keys ...handoff.TrustedKey) (*Publisher, error) {
	if cfg.MaxAge == 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.MaxAge < 0 {
		return nil, fmt.Errorf("%w: negative MaxAge", ErrConfig)
	}
	p := &Publisher{cfg: cfg}
	if err := p.Set(keys...); err != nil {
		return nil, err
	}
	return p, nil
}

// Set replaces the keys served. Each is written as a public JWK with its
// alg and kid (its thumbprint when it has none) and must read back as
// ParseJWKSet reads it, so that peers accept what is served.
func (p *Publisher) Set(keys ...handoff.TrustedKey) error {
	set := struct {
		Keys []json.RawMessage `json:"keys"`
	}{Keys: []json.RawMessage{}}
	for i, k := range keys {
		jwk, err := PublicJWK(k)
		if err != nil {
			return fmt.Errorf("keyset: key %d: %w", i, err)
		}
		set.Keys = append(set.Keys, jwk)
	}
	body, err := json.Marshal(set)
	if err != nil {
		return err
	}
	if _, err := ParseJWKSet(body, ""); err != nil {
		return fmt.Errorf("keyset: the set would be refused: %w", err)
	}
	sum := sha256.Sum256(body)
	etag := `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`
	p.mu.Lock()
	p.body, p.etag = body, etag
	p.mu.Unlock()
	return nil
}

// ETag returns the ETag of the set served now.
func (p *Publisher) ETag() string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.etag
}

func (p *Publisher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p.mu.RLock()
	body, etag := p.body, p.etag
	p.mu.RUnlock()
	h := w.Header()
	h.Set("Cache-Control", "public, max-age="+strconv.FormatInt(int64(p.cfg.MaxAge/time.Second), 10))
	h.Set("ETag", etag)
	h.Set("X-Content-Type-Options", "nosniff")
	if matches(r.Header.Values("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
	} else {
		h.Set("Content-Type", "application/jwk-set+json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method == http.MethodGet {
			w.Write(body)
		} else {
			w.WriteHeader(http.StatusOK)
		}
	}
	if p.cfg.OnServe != nil && r.Method == http.MethodGet {
		p.cfg.OnServe(r, etag)
	}
}

// matches applies If-None-Match's weak comparison (RFC 9110 section
// 13.1.2): "*" or any listed tag whose opaque part equals etag's.
func matches(lines []string, etag string) bool {
	for _, line := range lines {
		for _, t := range strings.Split(line, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == etag {
				return true
			}
		}
	}
	return false
}
