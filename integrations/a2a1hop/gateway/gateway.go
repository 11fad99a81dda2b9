// Package gateway puts the handoff of the draft "Signed Handoff Context for
// Agentic Dialogs" in front of A2A 1.0 agents that cannot import this
// library, whatever their language: a reverse proxy in front of an
// unchanged A2A server (Delegate), and a forward proxy for an unchanged A2A
// client (Delegator). Both speak A2A 1.0 over JSON-RPC and HTTP+JSON, on
// each side, and reuse a2a1hop: the Delegate is an a2asrv server whose
// executor is a2a1hop's, wrapping one that forwards to the upstream through
// an a2aclient; the Delegator sends through a2a1hop's Client. Neither is a
// second implementation of the draft.
//
// # Delegate
//
// A Delegate answers for the agent behind it (DelegateConfig.Agent, whose
// AgentID offers name as aud). On message/send and message/stream it runs
// the seven checks of section 5.1 on the Handoff in Message.metadata
// (section 6.1, HC-66) through a2a1hop's executor, so that:
//
//   - a refused offer never reaches the upstream: the task is
//     TASK_STATE_REJECTED with the signed "rejected" the draft asks for
//     (HC-30), none for an offer whose signature failed;
//   - a retransmission never reaches the upstream: it is answered with the
//     hop's last status, the identical octets, when the caller is the
//     offer's iss as DelegateConfig.Peer authenticated it (HC-38, HC-39);
//   - an equivocating offer never reaches the upstream and gets no status
//     (HC-53);
//   - a message without a Handoff is refused unless
//     DelegateConfig.Optional;
//   - an accepted offer is taken ("accepted", TASK_STATE_WORKING), then the
//     message is sent to the upstream, with the Handoff removed unless
//     DelegateConfig.KeepHandoff, and the upstream's events come back as the
//     gateway's task's own. It is sent as a message/stream whatever the
//     client called, so that the upstream's task is known at once and a
//     tasks/cancel reaches it; an upstream that does not stream gets a
//     message/send. A task the upstream left working when its answer
//     ended is followed (tasks/subscribe, else tasks/get) until it settles.
//
// The statuses of the hop follow what the upstream's task does, in the
// metadata where the draft places them (TaskStatus.message of the reply
// and of each streamed status update):
//
//	upstream                            the hop
//	TASK_STATE_COMPLETED, or a Message   "completed" (the task completes)
//	TASK_STATE_REJECTED                  "failed", no refs: the upstream did not
//	                                     do the work (the task fails)
//	an A2A error answer, or no connection "failed", no refs (the task fails)
//	TASK_STATE_FAILED                     no status: whether the work took effect
//	                                     is not known, so the hop stays "accepted"
//	                                     (HC-25, HC-45); "failed", no refs, with
//	                                     DelegateConfig.FailedMeansNoEffect
//	TASK_STATE_CANCELED, a lost stream   no status: the hop stays "accepted"
//	TASK_STATE_INPUT_REQUIRED, ..._AUTH_ stay in the host protocol (HC-29)
//
// A delegate never signs "canceled": that is the delegator's (section 4). A
// tasks/cancel whose metadata carries the delegator's signed "canceled" for
// the task's hop is verified and applied before the upstream's task is
// canceled (HC-28); one that carries none cancels the A2A task only, or is
// refused with DelegateConfig.RequireSignedCancel.
//
// The gateway's task is its own (its id is not the upstream's); its
// metadata names the upstream's task under UpstreamTaskKey, for tasks/get,
// tasks/cancel and the messages that follow. A message that follows on a
// task the upstream paused (TASK_STATE_INPUT_REQUIRED: the client's
// answer, with the hop's identical Handoff, as a2a1hop's Client.Retransmit
// or the Delegator sends it) is the hop's work resumed (a2a1hop,
// handoff.Agent.Resume): it is sent on that same upstream task, never a
// new one, and the hop's statuses follow the task as before, so that the
// hop completes when the upstream's task does
// (TestDelegate_FollowUp_ContinuesTheUpstreamTask). Its AgentCard is the
// upstream's with the gateway's interfaces, the extension declared in
// capabilities.extensions (required unless Optional), and signed with
// DelegateConfig.CardKey (package agentcard, A2A 1.0 section 8.4).
//
// # The handoff in the forwarded message
//
// By default the Handoff is removed from the message sent upstream, with
// the extension's URI from its extensions and from the A2A-Extensions
// service parameter. The upstream knows nothing of handoffs: the gateway
// has checked the offer and answers for the hop, and a Handoff passed on
// would disclose the chain and obo to a party that checks neither (HC-63).
// KeepHandoff passes it on, for an upstream that reads it.
//
// # Delegator
//
// A Delegator stands for the agent that sends (DelegatorConfig.Agent) in
// front of one target agent (DelegatorConfig.To at DelegatorConfig.Upstream).
// Each message/send and message/stream from the client gets an offer
// signed for the target: its dialog is the message's contextId (one is
// made when the message names none), its task the message's taskId. A call
// that times out, or whose reply is lost with its connection, is sent
// again with the identical Handoff (HC-37, HC-52); the statuses that come
// back are verified and applied (Agent.HandleStatus), and the client gets
// the target's reply as it came. A tasks/cancel for a task of a hop it
// sent carries the delegator's signed "canceled" (HC-28). Every other
// method passes through.
//
// # Restart
//
// The hops a Delegate took and the statuses it sent live in the Agent's
// replay.Store: with a durable one (bbolt, Redis, PostgreSQL) a gateway
// that restarts answers a retransmission with the hop's last status and
// takes no hop twice (HC-34). The A2A tasks live in DelegateConfig.Tasks,
// in memory by default: a task of before a restart is then unknown to
// tasks/get, while its hop is not.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/agentcard"

	"github.com/agentproto/handoff/integrations/a2a1hop"
)

// The paths a gateway serves, below its base URL.
const (
	// CardPath serves the AgentCard (A2A 1.0's well-known path).
	CardPath = "/.well-known/agent-card.json"
	// JSONRPCPath serves the JSON-RPC binding.
	JSONRPCPath = "/jsonrpc"
	// RESTPath is the base of the HTTP+JSON binding.
	RESTPath = "/rest"
)

// UpstreamTaskKey is the key, in the metadata of a Delegate's task, of the
// upstream task it forwards to. Only the gateway writes it: keys of the
// extension's namespace in the upstream's metadata are not copied.
const UpstreamTaskKey = a2a1hop.ExtensionURI + "/upstream-task"

// ErrUpstream is the class of the errors about the agent behind a gateway
// that keep it from starting: its card could not be fetched or read, or
// names no interface a2a-go/v2 can call.
var ErrUpstream = errors.New("gateway: upstream")

// fetchCard fetches the AgentCard of the agent at base (its well-known
// path), as served, within agentcard.DefaultMaxSize, and parses it; hc
// nil means a client with no timeout, for streams, which it returns.
func fetchCard(ctx context.Context, hc *http.Client, base string) (*http.Client, []byte, *a2a.AgentCard, error) {
	if hc == nil {
		hc = &http.Client{}
	}
	url := strings.TrimSuffix(base, "/") + CardPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %s: %w", ErrUpstream, url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrUpstream, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, nil, fmt.Errorf("%w: GET %s: %s", ErrUpstream, url, resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, agentcard.DefaultMaxSize+1))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: GET %s: %w", ErrUpstream, url, err)
	}
	if len(raw) > agentcard.DefaultMaxSize {
		return nil, nil, nil, fmt.Errorf("%w: %s: the card exceeds %d octets: %w", ErrUpstream, url, agentcard.DefaultMaxSize, handoff.ErrTooLarge)
	}
	var card a2a.AgentCard
	if err := json.Unmarshal(raw, &card); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %s: %w: %w", ErrUpstream, url, handoff.ErrMalformed, err)
	}
	if len(card.SupportedInterfaces) == 0 {
		return nil, nil, nil, fmt.Errorf("%w: %s: the card lists no A2A 1.0 interface (supportedInterfaces)", ErrUpstream, url)
	}
	return hc, raw, &card, nil
}

// dial returns an A2A client of the agent card describes, over hc, with ics
// among its interceptors.
func dial(ctx context.Context, card *a2a.AgentCard, hc *http.Client, ics ...a2aclient.CallInterceptor) (*a2aclient.Client, error) {
	cl, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
		a2aclient.WithCallInterceptors(ics...))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUpstream, err)
	}
	return cl, nil
}

// members is a JSON object whose members are kept as they were, in the
// cards the gateways serve: what the gateway does not change, it does not
// decode.
type members map[string]json.RawMessage

func parseMembers(raw []byte) (members, error) {
	var m members
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", handoff.ErrMalformed, err)
	}
	return m, nil
}

// jsonValue is v's JSON form.
func jsonValue(v any) (json.RawMessage, error) { return json.Marshal(v) }

func (m members) set(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	m[name] = b
	return nil
}

// servedCard returns the card a gateway at base serves for the agent whose
// card is raw: raw's members, its supportedInterfaces the gateway's two
// bindings, its signatures dropped (they cover the upstream's interfaces),
// and capabilities changed by caps.
func servedCard(raw []byte, base string, caps func(members) error) ([]byte, error) {
	card, err := parseMembers(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: card: %w", ErrUpstream, err)
	}
	base = strings.TrimSuffix(base, "/")
	ifaces := []*a2a.AgentInterface{
		{URL: base + JSONRPCPath, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
		{URL: base + RESTPath, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: a2a.Version},
	}
	if err := card.set("supportedInterfaces", ifaces); err != nil {
		return nil, err
	}
	delete(card, "signatures")
	c := members{}
	if b, ok := card["capabilities"]; ok {
		if c, err = parseMembers(b); err != nil {
			return nil, fmt.Errorf("%w: card: capabilities: %w", ErrUpstream, err)
		}
	}
	if err := caps(c); err != nil {
		return nil, err
	}
	if err := card.set("capabilities", c); err != nil {
		return nil, err
	}
	return json.Marshal(card)
}

// extensions returns the card's capabilities.extensions without the
// handoff extension's.
func (m members) extensions() ([]json.RawMessage, error) {
	var exts []json.RawMessage
	if b, ok := m["extensions"]; ok {
		if err := json.Unmarshal(b, &exts); err != nil {
			return nil, fmt.Errorf("%w: card: capabilities.extensions: %w: %w", ErrUpstream, handoff.ErrMalformed, err)
		}
	}
	return slices.DeleteFunc(exts, func(b json.RawMessage) bool {
		var e struct {
			URI string `json:"uri"`
		}
		return json.Unmarshal(b, &e) == nil && e.URI == a2a1hop.ExtensionURI
	}), nil
}

// serve returns the gateway's handler: the card at CardPath, rh over
// JSON-RPC at JSONRPCPath and over HTTP+JSON below RESTPath, each request
// with the caller peer names in its context (a2a1hop.WithPeer).
func serve(card []byte, rh a2asrv.RequestHandler, peer func(*http.Request) (handoff.AgentID, bool)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+CardPath, func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write(card)
	})
	mux.Handle(JSONRPCPath, a2asrv.NewJSONRPCHandler(rh))
	mux.Handle(RESTPath+"/", http.StripPrefix(RESTPath, a2asrv.NewRESTHandler(rh)))
	if peer == nil {
		return mux
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if id, ok := peer(r); ok && id != "" {
			r = r.WithContext(a2a1hop.WithPeer(r.Context(), id))
		}
		mux.ServeHTTP(rw, r)
	})
}

// forwarded returns the service parameters of the incoming call that go
// on to the next agent: the values of the headers named, and the
// extensions of A2A-Extensions, without the handoff's when drop is set.
func forwarded(sp *a2asrv.ServiceParams, names []string, drop bool) a2aclient.ServiceParams {
	out := a2aclient.ServiceParams{}
	for _, n := range names {
		if strings.EqualFold(n, a2a.SvcParamExtensions) {
			continue
		}
		if v, ok := sp.Get(n); ok {
			out.Append(n, v...)
		}
	}
	if v, ok := sp.Get(a2a.SvcParamExtensions); ok {
		for _, line := range v {
			for e := range strings.SplitSeq(line, ",") {
				if e = strings.TrimSpace(e); e != "" && !(drop && e == a2a1hop.ExtensionURI) {
					out.Append(a2a.SvcParamExtensions, e)
				}
			}
		}
	}
	return out
}

// callParams returns the service parameters of the call ctx serves.
func callParams(ctx context.Context) *a2asrv.ServiceParams {
	if cc, ok := a2asrv.CallContextFrom(ctx); ok {
		return cc.ServiceParams()
	}
	return nil
}

// answered reports whether err is the answer of an A2A agent that refused
// the call: the request reached it and it did nothing with it. An internal
// or server error says nothing of what was done.
func answered(err error) bool {
	var ae *a2a.Error
	if !errors.As(err, &ae) {
		return false
	}
	return !errors.Is(err, a2a.ErrInternalError) && !errors.Is(err, a2a.ErrServerError) && !errors.Is(err, a2a.ErrInvalidAgentResponse)
}

// unsent reports whether err shows that the request never left: the
// connection to the agent could not be made.
func unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
