// Package keyset keeps a receiver's trust configuration in step with the
// keys agents publish: each agent serves its public keys as a JWK Set
// (RFC 7517) at a URL, and a Source fetches the configured URLs, caches
// them by their HTTP headers, and swaps each change into running Agents
// as handoff.Agent.SetTrust does. A Publisher is the other side: the
// http.Handler that serves an agent's own keys with the headers a Source
// reads.
//
// # What is trusted
//
// Only the URLs in Config are ever fetched. A URL, key or kid found in a
// message (a jku or x5u header, a member of an offer) is never followed:
// keys carried in messages are never consulted (HC-21), and each key stays
// pinned to one algorithm (HC-22). A message's iss selects which configured
// URL to refresh when its kid names no known key, nothing more.
//
// Every key of a fetched set is validated as ParseTrust validates
// a trust document: public keys only (a private member refuses the
// document), the algorithm pinned (ES256, ES384 or EdDSA, HC-15), the key
// type and curve checked against it, and a key without "alg" refused
// unless it is a P-256 key (ES256) or Endpoint.Alg pins it. A document that
// fails validation is refused whole, logged, and the last good set is kept.
//
// # Refresh
//
//   - A set is fresh for the lifetime its response gives (Cache-Control
//     max-age less Age, else Expires less Date, RFC 9111 section 4.2.1;
//     no-cache and no-store mean no lifetime), DefaultInterval when the
//     response gives none, clamped to [Config.MinRefresh, Config.MaxRefresh].
//     Run refreshes it in the background before that lifetime ends (at
//     nine tenths of it, never sooner than MinRefresh after the last
//     refresh), so no lookup waits for the network and the next set is in
//     before this one expires; it revalidates with If-None-Match, and a
//     304 keeps the set without parsing anything.
//   - A message whose kid names no key of its iss (or whose iss has no key)
//     makes the Source refresh that agent's URL at once, at most once per
//     MinRefresh per URL whatever the message says, so forged kids cannot
//     make a receiver hammer a key server. The message itself is checked
//     under the keys known when it arrived; its sender's retransmission
//     meets the new ones. A rotation that loses no message publishes the
//     new key first and signs with it once peers have fetched it (the
//     demo in integrations/cmd/handoff-demo does exactly that).
//   - A failed refresh (network error, timeout, status other than 200 or
//     304, redirect, oversized or invalid document) keeps the last good set
//     and is retried after MinRefresh.
//
// # Rotation and failing closed
//
// A key that disappears from its agent's set stays trusted for
// Config.Grace, so that offers and chain elements it signed just before
// the rotation still verify; then it is dropped. When an agent's URL has
// not been fetched successfully for Config.MaxStale, its keys are withheld
// (handoff.Trust.Withhold): its offers are refused as untrusted-key, with a
// detail saying that its keys are stale and since when. An agent whose URL
// was never fetched has no keys. Each change reaches the Agents given to
// Follow as one atomic swap; the Agent's verified-element cache keeps the
// elements whose verifying key stays and drops those of the keys removed
// (SetTrust).
//
// # Across processes
//
// State returns what a Source holds (each URL's last good document, its
// ETag and times, the retired keys still in their grace period) and
// Config.State gives it to the next process, which validates every
// document again and fetches nothing before it is due; the times in it
// never put a refresh later than the configuration allows. cmd/handoff's
// verify --trust-cache keeps it in a file.
//
// # HTTP
//
// Requests carry a timeout (Config.Timeout), read at most Config.MaxSize
// octets, and refuse every redirect: a key server that moves its set is
// reconfigured, not followed. Plain http is refused except to a loopback
// address, unless Config.AllowHTTP says otherwise.
//
// # Why no JWKS library
//
// The two well-kept Go libraries for this job were read before writing
// this package. github.com/MicahParks/keyfunc (v3) caches remote JWK Sets
// through github.com/MicahParks/jwkset: a refresh interval, a rate-limited
// refresh on an unknown kid (golang.org/x/time/rate), and its own JWK
// model. github.com/lestrrat-go/jwx (v3) has jwk.Cache on its httprc
// fetcher, which honours Cache-Control and Expires between a minimum and a
// maximum interval, with jwx's own JWK model. Either would bring a second
// JWK parser beside go-jose's, whose every key would still have to be
// converted and checked again by ParseJWK's rules (alg pinned,
// curve checked, private keys refused), and several modules to the root
// module; neither keeps a retired key for a grace period or fails closed
// per agent past a staleness bound, which are the parts a handoff receiver
// needs most. What remains, a conditional GET and a header parse, is
// short with net/http, so this package uses net/http, log/slog and the
// module's own JWK parsing, and the root module gains no dependency.
package keyset
