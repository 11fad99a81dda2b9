package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentproto/handoff"

	"github.com/agentproto/handoff/integrations/a2a1hop/gateway"
)

// gatewayStartTimeout bounds what the gateway does before it serves:
// opening its store and fetching the card of the agent behind it.
const gatewayStartTimeout = 30 * time.Second

func runGateway(e *env, args []string) int {
	fset := newFlagSet("gateway")
	id := fset.String("id", "", "the `AGENTID` the gateway answers for (or, with --delegator, sends as) (required)")
	keyPath := fset.String("key", "", "that agent's private JWK, as keygen writes it: it signs the statuses (or the offers) and the card (`KEY.jwk`, required)")
	trustFlags := addTrustFlags(fset)
	listen := fset.String("listen", "127.0.0.1:8080", "the `ADDR` to serve on")
	public := fset.String("url", "", "the gateway's base `URL` as its clients reach it, named by the card it serves (default: http://ADDR)")
	upstream := fset.String("upstream", "", "the base `URL` of the A2A 1.0 agent behind the gateway (with --delegator, of the target); "+
		"its card is fetched from URL/.well-known/agent-card.json (required)")
	storeSpec := fset.String("store", "memory", storeUsage)
	optional := fset.Bool("optional", false, "let a message without a Handoff through to the upstream; by default it is refused, as the middleware refuses it")
	keep := fset.Bool("keep-handoff", false, "pass the Handoff on to the upstream in the message's metadata; by default it is removed: "+
		"the gateway answers for the hop, and the upstream checks nothing")
	failedNone := fset.Bool("failed-means-no-effect", false, "a task the upstream ends in TASK_STATE_FAILED did nothing: the hop gets \"failed\"; "+
		"by default its outcome is unknown and the hop stays \"accepted\" (HC-25)")
	requireCancel := fset.Bool("require-signed-cancel", false, "refuse a tasks/cancel that carries no verified \"canceled\" of the delegator; "+
		"by default it cancels the A2A task only")
	peer := fset.String("peer", "", "take every caller to be `AGENTID`: for a gateway that only that delegator reaches; "+
		"a retransmission gets the hop's last status only from a caller so authenticated (HC-39)")
	peerHeader := fset.String("peer-header", "", "take the caller's AgentID from the request header `NAME`, which an authenticating proxy "+
		"in front of the gateway sets (and strips from what clients send)")
	var forward listFlag
	fset.Var(&forward, "forward-header", "pass the request header `NAME` on to the next agent, such as Authorization (repeatable; A2A-Extensions always is)")
	delegator := fset.Bool("delegator", false, "the delegator's side: a proxy for an A2A client, which signs an offer to --to for every message")
	to := fset.String("to", "", "with --delegator: the target's `AGENTID`, the aud of every offer (required)")
	ttl := &secondsFlag{}
	fset.Var(ttl, "ttl", "with --delegator: each offer's lifetime in `SECONDS` (default 120); a call not answered by half of it is asked again")
	attempts := fset.Int("attempts", 0, "with --delegator: how many times a hop whose reply was lost is sent again (0 means 3; negative: never)")
	requireCard := fset.Bool("require-signed-card", false, "with --delegator: start only if the target's card verifies for --to with the trust (A2A 1.0 section 8.4)")
	unsignedCard := fset.Bool("unsigned-card", false, "serve the upstream's card unsigned; by default the gateway signs it with --key")
	usage := func() string {
		return usageText(fset, `Usage: handoff gateway --id AGENTID --key KEY.jwk --trust TRUST.json --upstream URL
                       [--listen ADDR] [--url URL] [--store memory|FILE|redis://...|postgres://...]
                       [--optional] [--keep-handoff] [--failed-means-no-effect] [--require-signed-cancel]
                       [--peer AGENTID | --peer-header NAME] [--forward-header NAME]... [--unsigned-card]
       handoff gateway --delegator --id AGENTID --key KEY.jwk --trust TRUST.json --to AGENTID --upstream URL
                       [--listen ADDR] [--url URL] [--store ...] [--ttl SECONDS] [--attempts N]
                       [--require-signed-card] [--forward-header NAME]...

Puts signed handoffs in front of an A2A 1.0 agent (JSON-RPC or HTTP+JSON)
that knows nothing of them, in any language.

The delegate's side (default) is a reverse proxy in front of the agent at
--upstream, answering as --id. On message/send and message/stream it runs
the seven checks of the draft on the Handoff in the message's metadata: a
refused, retransmitted or equivocating offer never reaches the upstream; a
refused one gets the "rejected" the draft asks for, a retransmission the
hop's last status. An accepted offer is answered "accepted" and forwarded,
the Handoff removed (--keep-handoff keeps it); "completed" or "failed"
follow from the upstream's task, in the statuses' places in the replies
and the streamed updates. A tasks/cancel with the delegator's signed
"canceled" is verified and applied before the upstream's task is canceled.
The gateway serves the upstream's card with the extension declared and
signed with --key.

The delegator's side (--delegator) is a proxy for an A2A client that knows
nothing of handoffs, in front of the target agent --to at --upstream: each
message it sends gets an offer signed as --id, with the message's
contextId as dialog, sent again with the identical Handoff when the reply
is lost; the statuses that come back are verified and applied, and the
client gets the reply as it came. Its tasks/cancel carries the signed
"canceled".

Paths: /.well-known/agent-card.json (the card), /jsonrpc (JSON-RPC),
/rest (HTTP+JSON). Logs go to stderr; SIGINT or SIGTERM stops the gateway.
Exit status: 0 stopped by a signal, 2 usage error or a failure to start or
serve.`, `  handoff gateway --id spiffe://b.example/agent/coder --key coder.jwk --trust trust.json \
      --upstream http://127.0.0.1:9000 --listen 127.0.0.1:8080 --store coder-gateway.db \
      --peer spiffe://a.example/agent/planner
  handoff gateway --delegator --id spiffe://a.example/agent/planner --key planner.jwk --trust trust.json \
      --to spiffe://b.example/agent/coder --upstream http://127.0.0.1:8080 --listen 127.0.0.1:8081
  # behind a proxy that authenticates callers and names them in a header
  handoff gateway --id B --key b.jwk --trust b-trust.json --trust-url A=https://a.example/jwks.json \
      --upstream http://127.0.0.1:9000 --peer-header X-Client-AgentID --store redis://127.0.0.1:6379/0`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "gateway"
	explicit := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	only := func(names ...string) string {
		for _, n := range names {
			if explicit[n] {
				return n
			}
		}
		return ""
	}
	switch {
	case len(pos) > 0:
		return e.usagef(cmd, "no arguments expected, got %q", pos[0])
	case *id == "" || *keyPath == "" || *upstream == "":
		return e.usagef(cmd, "--id, --key and --upstream are required")
	case trustFlags.problem() != "":
		return e.usagef(cmd, "%s", trustFlags.problem())
	case *delegator && *to == "":
		return e.usagef(cmd, "--delegator needs --to, the target's AgentID")
	case *delegator && only("optional", "keep-handoff", "failed-means-no-effect", "require-signed-cancel", "peer", "peer-header", "unsigned-card") != "":
		return e.usagef(cmd, "--%s is for the delegate's side, not with --delegator", only("optional", "keep-handoff",
			"failed-means-no-effect", "require-signed-cancel", "peer", "peer-header", "unsigned-card"))
	case !*delegator && only("to", "ttl", "attempts", "require-signed-card") != "":
		return e.usagef(cmd, "--%s needs --delegator", only("to", "ttl", "attempts", "require-signed-card"))
	case *peer != "" && *peerHeader != "":
		return e.usagef(cmd, "--peer and --peer-header exclude each other")
	}

	key, warn, err := loadKey(*keyPath)
	if err != nil {
		return e.failf(cmd, "--key: %v", err)
	}
	if warn != "" {
		e.warnf(cmd, "%s", warn)
	}
	signer, err := handoff.NewSigner(key, handoff.JWS, nil)
	if err != nil {
		return e.failf(cmd, "--key: %v", err)
	}
	trust, trustDone, code, ok := trustFlags.load(e, cmd)
	if !ok {
		return code
	}
	defer trustDone()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sctx, cancel := context.WithTimeout(ctx, gatewayStartTimeout)
	defer cancel()
	st, err := openStores(sctx, *storeSpec)
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	defer st.close()
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	cfg := handoff.Config{ID: handoff.AgentID(*id), Signer: signer, Trust: trust, Store: st.hops, Offers: st.offers, Logger: log}
	if !st.durable {
		// What a restart loses: offers issued before it are replays until
		// they cannot be fresh (HC-59).
		cfg.MemoryLostAt = time.Now()
	}
	agent, err := handoff.NewAgent(cfg)
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	if src := trustFlags.src; src != nil {
		// A gateway runs long: it follows the keys the URLs publish.
		if err := src.Follow(agent.SetTrust); err != nil {
			return e.failf(cmd, "%v", err)
		}
		go func() { _ = src.Run(ctx) }()
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return e.failf(cmd, "--listen: %v", err)
	}
	defer ln.Close()
	base := *public
	if base == "" {
		base = "http://" + reachable(ln.Addr())
	}
	var h interface {
		http.Handler
		Close() error
	}
	if *delegator {
		var cardTrust *handoff.Trust
		if *requireCard {
			cardTrust = trust
		}
		h, err = gateway.NewDelegator(sctx, gateway.DelegatorConfig{Agent: agent, To: handoff.AgentID(*to), Upstream: *upstream, URL: base,
			TTL: ttl.d, Attempts: *attempts, CardTrust: cardTrust, ForwardHeaders: forward, Logger: log})
	} else {
		dc := gateway.DelegateConfig{Agent: agent, Upstream: *upstream, URL: base, Optional: *optional, KeepHandoff: *keep,
			FailedMeansNoEffect: *failedNone, RequireSignedCancel: *requireCancel, ForwardHeaders: forward, Logger: log,
			Peer: peerOf(handoff.AgentID(*peer), *peerHeader)}
		if !*unsignedCard {
			dc.CardKey = key
		}
		h, err = gateway.NewDelegate(sctx, dc)
	}
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	defer h.Close()

	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	side := "the delegate's side, in front of"
	if *delegator {
		side = "the delegator's side, to " + *to + " at"
	}
	fmt.Fprintf(e.stderr, "handoff gateway: %s as %s, %s %s: listening on %s (card %s, JSON-RPC %s, HTTP+JSON %s)\n",
		storeName(*storeSpec), *id, side, *upstream, base, gateway.CardPath, gateway.JSONRPCPath, gateway.RESTPath)
	select {
	case err := <-served:
		return e.failf(cmd, "serve: %v", err)
	case <-ctx.Done():
	}
	shut, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		e.warnf(cmd, "shutdown: %v", err)
	}
	fmt.Fprintln(e.stderr, "handoff gateway: stopped")
	return exitOK
}

// reachable is addr as a client on this host reaches it: an unspecified
// host (":8080", "0.0.0.0:8080") is reached on loopback.
func reachable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// peerOf returns the gateway's Peer for --peer or --peer-header, nil for
// neither.
func peerOf(id handoff.AgentID, header string) func(*http.Request) (handoff.AgentID, bool) {
	switch {
	case id != "":
		return func(*http.Request) (handoff.AgentID, bool) { return id, true }
	case header != "":
		return func(r *http.Request) (handoff.AgentID, bool) {
			v := r.Header.Get(header)
			return handoff.AgentID(v), v != ""
		}
	}
	return nil
}

// storeName says which store keeps the hops, for the start line: never a
// DSN, which may hold a password.
func storeName(spec string) string {
	switch storeKind(spec) {
	case storeMemory:
		return "hops in memory"
	case storeRedis:
		return "hops in Redis"
	case storePostgres:
		return "hops in PostgreSQL"
	}
	return "hops in " + spec
}
