package keyset

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentproto/handoff"
)

// stateVersion names the form of State's output.
const stateVersion = 1

type stateDoc struct {
	Version   int             `json:"version"`
	Endpoints []stateEndpoint `json:"endpoints"`
}

type stateEndpoint struct {
	URL     string         `json:"url"`
	Agent   string         `json:"agent,omitempty"`
	Alg     string         `json:"alg,omitempty"`
	Body    []byte         `json:"body,omitempty"`
	ETag    string         `json:"etag,omitempty"`
	Good    time.Time      `json:"good"`
	Due     time.Time      `json:"due"`
	Tried   time.Time      `json:"tried"`
	Retired []stateRetired `json:"retired,omitempty"`
}

type stateRetired struct {
	Agent string          `json:"agent"`
	JWK   json.RawMessage `json:"jwk"`
	Gone  time.Time       `json:"gone"`
}

// State returns what the Source holds, as JSON for Config.State: each
// URL's last good document with its validator and times, and the retired
// keys still in their grace period. It holds public keys only.
func (s *Source) State() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	doc := stateDoc{Version: stateVersion}
	for _, ep := range s.eps {
		se := stateEndpoint{URL: ep.url, Agent: string(ep.agent), Alg: ep.alg, Body: ep.body, ETag: ep.etag,
			Good: ep.good, Due: ep.due, Tried: ep.tried}
		for id, rs := range ep.retired {
			for _, r := range rs {
				jwk, err := PublicJWK(r.key)
				if err != nil {
					return nil, err
				}
				se.Retired = append(se.Retired, stateRetired{Agent: string(id), JWK: jwk, Gone: r.gone})
			}
		}
		doc.Endpoints = append(doc.Endpoints, se)
	}
	return json.Marshal(doc)
}

// restore takes from a State output what belongs to a configured URL, each
// document validated again as a fetched one is. An entry for a URL, agent
// or pin the configuration does not hold is ignored: the file never adds
// a URL to fetch.
func (s *Source) restore(b []byte) error {
	var doc stateDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("keyset: state: %w", err)
	}
	if doc.Version != stateVersion {
		return fmt.Errorf("keyset: state version %d, want %d", doc.Version, stateVersion)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, se := range doc.Endpoints {
		var ep *endpoint
		for _, e := range s.eps {
			if e.url == se.URL && string(e.agent) == se.Agent && e.alg == se.Alg {
				ep = e
			}
		}
		if ep == nil || se.Body == nil || se.Good.IsZero() || se.Good.After(now) {
			continue
		}
		if int64(len(se.Body)) > s.cfg.MaxSize {
			s.note(slog.LevelWarn, "keyset: cached document too large; it is fetched again", "url", se.URL)
			continue
		}
		keys, err := s.parse(ep, se.Body)
		if err != nil {
			s.note(slog.LevelWarn, "keyset: cached document refused; it is fetched again", "url", se.URL, "err", err)
			continue
		}
		retired := map[handoff.AgentID][]retiredKey{}
		for _, r := range se.Retired {
			k, err := ParseJWK(r.JWK)
			if err != nil {
				s.note(slog.LevelWarn, "keyset: cached retired key refused", "url", se.URL, "err", err)
				continue
			}
			retired[handoff.AgentID(r.Agent)] = append(retired[handoff.AgentID(r.Agent)], retiredKey{key: k, id: keyID(k), gone: r.Gone})
		}
		ep.keys, ep.body, ep.etag, ep.retired = keys, se.Body, se.ETag, retired
		// Times from the file never put a refresh later than the
		// configuration allows.
		ep.good, ep.due, ep.tried = se.Good, se.Due, se.Tried
		if limit := se.Good.Add(s.cfg.MaxRefresh); ep.due.After(limit) {
			ep.due = limit
		}
		if ep.tried.After(now) {
			ep.tried = now
		}
	}
	return nil
}
