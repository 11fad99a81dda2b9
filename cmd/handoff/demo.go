package main

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/digest"
	"github.com/agentproto/handoff/keyset"
	"github.com/agentproto/handoff/reason"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/state"
)

// The demo's agents and data: embedded defaults, no files needed.
const (
	demoAssistant = handoff.AgentID("spiffe://u.example/agent/assistant")
	demoPlanner   = handoff.AgentID("spiffe://a.example/agent/planner")
	demoCoder     = handoff.AgentID("spiffe://b.example/agent/coder")
	demoDialog    = "demo-7c1e"
	demoTask      = "summarize-issue-9"
	demoEvilTask  = "delete-everything" // same length as demoTask
	demoIssueLoc  = "https://a.example/ctx/9"
	demoIssue     = `{"repo":"https://git.a.example/app","commit":"9fceb02","issue":9}`
	demoResult    = "Issue 9: the parser accepts a trailing comma; fix in 9fceb03.\n"
)

// demoClock is the demo's clock: it starts at the given time and moves
// forward only when told, so that the story's times are readable.
type demoClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *demoClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *demoClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type demoAgent struct {
	name  string
	id    handoff.AgentID
	key   crypto.Signer
	kid   string
	agent *handoff.Agent
}

func runDemo(e *env, args []string) int {
	fset := newFlagSet("demo")
	format := fset.String("format", "jws", "signed form the agents use: jws or cose")
	encoding := fset.String("encoding", "json", "encoding of Handoff objects: json or cbor")
	now := &unixFlag{}
	fset.Var(now, "now", "start the demo's clock at this `UNIX` time (default: the clock)")
	save := fset.String("save", "", "write the demo's keys, trust file, handoffs and statuses to `DIR`, to try the other commands on")
	usage := func() string {
		return usageText(fset, `Usage: handoff demo [--format jws|cose] [--encoding json|cbor] [--now UNIX] [--save DIR]

Runs the whole protocol in one process, on built-in defaults, with fresh
in-memory keys: an assistant hands a task to a planner, which passes it on
to a coder with the chain. The coder verifies the offer (accepted, full
chain, reference checked), answers "accepted" then "completed", and the
statuses verify back up the chain. Then a replayed offer is caught as a
retransmission and a tampered one is rejected as bad-signature.

The same over A2A and MCP, with five agents as separate processes and one
of them crashed and restarted mid-hop: from the repository, run
go run ./integrations/cmd/handoff-demo

Exit status: 0 when every step went as the draft says, 1 otherwise.`, `  handoff demo
  handoff demo --format cose --encoding cbor
  handoff demo --save demo-out && handoff inspect demo-out/planner-to-coder.json`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "demo"
	if len(pos) > 0 {
		return e.usagef(cmd, "unexpected argument %q", pos[0])
	}
	f, err := parseFormat(*format)
	if err != nil {
		return e.usagef(cmd, "%v", err)
	}
	enc, err := parseEncoding(*encoding)
	if err != nil {
		return e.usagef(cmd, "%v", err)
	}
	start := time.Now()
	if now.set {
		start = time.Unix(now.sec, 0)
	}
	d := &demo{e: e, format: f, enc: enc, clock: &demoClock{t: start.Truncate(time.Second)}, saveDir: *save}
	if *save != "" {
		if err := os.MkdirAll(*save, 0o755); err != nil {
			return e.failf(cmd, "--save: %v", err)
		}
	}
	if err := d.run(context.Background()); err != nil {
		if ioErr, ok := err.(demoIOError); ok {
			return e.failf(cmd, "%v", ioErr.err)
		}
		fmt.Fprintf(e.stdout, "\nUNEXPECTED: %v\n", err)
		return exitNo
	}
	return exitOK
}

type demoIOError struct{ err error }

func (d demoIOError) Error() string { return d.err.Error() }

type demo struct {
	e       *env
	format  handoff.Format
	enc     handoff.Encoding
	clock   *demoClock
	saveDir string
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.e.stdout, format+"\n", args...) }

func (d *demo) run(ctx context.Context) error {
	agents, trust, err := d.setup()
	if err != nil {
		return err
	}
	assistant, planner, coder := agents[0], agents[1], agents[2]
	issue := []byte(demoIssue)
	issueRef := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(issue), Loc: demoIssueLoc}

	d.say("handoff demo: three agents hand one task down a chain (%s elements, %s objects).", d.format, d.enc)
	d.say("")
	for _, a := range agents {
		d.say("  %-9s %-36s %-5s key %s", a.name, a.id, trustedAlg(a), a.kid)
	}
	d.say("Each agent trusts the others' public keys, bound to their AgentIds, and nothing else.")
	d.say("")

	// 1. assistant -> planner.
	d.say("1. assistant -> planner: offer (dialog %s, task %s, on behalf of user u-8f2a)", demoDialog, demoTask)
	d.say("   naming the issue it is about by digest: %s", refLine(issueRef))
	out1, err := assistant.agent.Offer(ctx, handoff.OfferParams{
		To: planner.id, Dialog: demoDialog, Task: demoTask, TTL: 2 * time.Minute,
		Obo: &handoff.Principal{Sub: "u-8f2a", Iss: "https://idp.u.example"}, Refs: []ref.Ref{issueRef},
	})
	if err != nil {
		return fmt.Errorf("assistant offer: %w", err)
	}
	h1, err := out1.Handoff.Encode(d.enc)
	if err != nil {
		return err
	}
	if err := d.saveFile("assistant-to-planner."+d.enc.String(), h1); err != nil {
		return err
	}
	d.clock.advance(2 * time.Second)
	in1, err := planner.agent.Receive(ctx, h1, handoff.Host{Dialog: demoDialog, Peer: assistant.id})
	if err != nil {
		return err
	}
	if err := d.expectAccepted("planner", in1, handoff.ChainFull); err != nil {
		return err
	}
	d.say("   planner verifies it: accepted, chain %s (a first hop starts its own chain)", in1.Chain())
	st, err := planner.agent.Reply(ctx, in1, state.Accepted, handoff.ReplyOptions{})
	if err != nil {
		return fmt.Errorf("planner reply: %w", err)
	}
	if err := d.deliver(assistant, st, state.Accepted, "planner -> assistant"); err != nil {
		return err
	}

	// 2. planner -> coder, with the chain.
	d.clock.advance(3 * time.Second)
	d.say("")
	d.say("2. planner -> coder: passes the work on with From: prev = digest of the assistant's offer,")
	d.say("   chain = [the assistant's offer]")
	out2, err := planner.agent.Offer(ctx, handoff.OfferParams{
		To: coder.id, From: in1, Task: demoTask, TTL: 2 * time.Minute, Refs: []ref.Ref{issueRef},
	})
	if err != nil {
		return fmt.Errorf("planner offer: %w", err)
	}
	h2, err := out2.Handoff.Encode(d.enc)
	if err != nil {
		return err
	}
	if err := d.saveFile("planner-to-coder."+d.enc.String(), h2); err != nil {
		return err
	}
	d.clock.advance(2 * time.Second)
	host := handoff.Host{Dialog: demoDialog, Peer: planner.id,
		RefSource: ref.ByLoc(map[string]ref.Object{demoIssueLoc: {Octets: issue}})}
	in2, err := coder.agent.Receive(ctx, h2, host)
	if err != nil {
		return err
	}
	if err := d.expectAccepted("coder", in2, handoff.ChainFull); err != nil {
		return err
	}
	d.say("   coder verifies it (dialog, full chain from a trusted origin, every reference): accepted, chain %s", in2.Chain())
	for i, l := range in2.Links() {
		if !l.Verified {
			return fmt.Errorf("chain[%d] not verified", i)
		}
		d.say("     chain[%d] %s -> %s: signature verified", i, l.Offer().Iss, l.Offer().Aud)
	}
	for i, r := range in2.Refs() {
		d.say("     refs[%d] %s: %s", i, r.Ref.Kind, r.Outcome)
		if r.Outcome != ref.Verified {
			return fmt.Errorf("refs[%d]: %s", i, r.Outcome)
		}
	}

	// 3. Statuses back up the chain.
	d.clock.advance(time.Second)
	d.say("")
	d.say("3. coder -> planner: \"accepted\", then, once the work took full effect, \"completed\"")
	acc, err := coder.agent.Reply(ctx, in2, state.Accepted, handoff.ReplyOptions{})
	if err != nil {
		return fmt.Errorf("coder accepted: %w", err)
	}
	if err := d.saveFile("accepted."+d.format.String(), acc.Octets); err != nil {
		return err
	}
	if err := d.deliver(planner, acc, state.Accepted, "coder -> planner"); err != nil {
		return err
	}
	d.clock.advance(20 * time.Second)
	result := []byte(demoResult)
	resultRef := ref.Ref{Kind: ref.KindDigest, Dig: digest.SHA256(result)}
	done, err := coder.agent.Reply(ctx, in2, state.Completed, handoff.ReplyOptions{
		Effect: state.EffectFull, Refs: []ref.Ref{resultRef}})
	if err != nil {
		return fmt.Errorf("coder completed: %w", err)
	}
	if err := d.saveFile("completed."+d.format.String(), done.Octets); err != nil {
		return err
	}
	if err := d.deliver(planner, done, state.Completed, "coder -> planner"); err != nil {
		return err
	}
	if hi, _, _ := planner.agent.Hop(ctx, out2.Offer.Hop); !hi.Resolved {
		return fmt.Errorf("planner: the coder's hop is not resolved")
	}
	d.clock.advance(time.Second)
	up, err := planner.agent.Reply(ctx, in1, state.Completed, handoff.ReplyOptions{
		Effect: state.EffectFull, Refs: []ref.Ref{resultRef}})
	if err != nil {
		return fmt.Errorf("planner completed: %w", err)
	}
	if err := d.deliver(assistant, up, state.Completed, "planner -> assistant"); err != nil {
		return err
	}
	d.say("   both hops are resolved; the result travels by digest: %s", refLine(resultRef))

	// 4. A replay.
	d.clock.advance(5 * time.Second)
	d.say("")
	d.say("4. the planner's offer arrives at the coder again (a replay or a resend):")
	again, err := coder.agent.Receive(ctx, h2, host)
	if err != nil {
		return err
	}
	if !again.Retransmission() || again.Accepted() {
		return fmt.Errorf("replay: retransmission=%t accepted=%t reason=%q", again.Retransmission(), again.Accepted(), again.Reason())
	}
	last, ok := again.LastStatus()
	if !ok || !bytes.Equal(last.Octets, done.Octets) {
		return fmt.Errorf("replay: the last status is not the \"completed\" sent")
	}
	d.say("   coder: retransmission, not processed again; it resends its last status, the")
	d.say("   identical \"completed\" octets (digest %s)", last.Digest().B64())

	// 5. A tampered copy.
	d.say("")
	d.say("5. a copy with the task changed to %q after signing, signature left as it was:", demoEvilTask)
	bad, err := tamper(out2.Handoff, d.enc)
	if err != nil {
		return err
	}
	if err := d.saveFile("tampered."+d.enc.String(), bad); err != nil {
		return err
	}
	rej, err := coder.agent.Receive(ctx, bad, host)
	if err != nil {
		return err
	}
	if rej.Accepted() || rej.Reason() != reason.BadSignature {
		return fmt.Errorf("tampered offer: accepted=%t reason=%q", rej.Accepted(), rej.Reason())
	}
	d.say("   coder: rejected, reason %s", rej.Reason())

	d.say("")
	d.say("Every step went as the draft says. Trust comes from the trust configuration only:")
	d.say("no key in a message is ever used, and a verified offer grants no authority by itself.")
	if d.saveDir != "" {
		if err := d.saveKeys(agents, trust); err != nil {
			return err
		}
		dir := d.saveDir
		d.say("")
		d.say("Files written to %s. Try (the offers expire two minutes after the demo's start):", dir)
		d.say("  handoff inspect %s", filepath.Join(dir, "planner-to-coder."+d.enc.String()))
		d.say("  handoff verify --self %s --trust %s --now %d --dialog %s %s", coder.id, filepath.Join(dir, "trust.json"),
			d.clock.now().Unix(), demoDialog, filepath.Join(dir, "planner-to-coder."+d.enc.String()))
		d.say("  handoff verify-status --trust %s --offer %s %s", filepath.Join(dir, "trust.json"),
			filepath.Join(dir, "planner-to-coder."+d.enc.String()), filepath.Join(dir, "completed."+d.format.String()))
	}
	return nil
}

// setup makes the three agents with fresh keys and one shared trust
// configuration.
func (d *demo) setup() ([]*demoAgent, *handoff.Trust, error) {
	spec := []struct {
		name string
		id   handoff.AgentID
		alg  string
	}{
		{"assistant", demoAssistant, handoff.ES256},
		{"planner", demoPlanner, handoff.ES256},
		{"coder", demoCoder, handoff.EdDSA},
	}
	agents := make([]*demoAgent, len(spec))
	signers := make([]*handoff.Signer, len(spec))
	keys := map[handoff.AgentID][]handoff.TrustedKey{}
	for i, s := range spec {
		key, err := generateKey(s.alg)
		if err != nil {
			return nil, nil, err
		}
		if signers[i], err = handoff.NewSigner(key, d.format, nil); err != nil {
			return nil, nil, err
		}
		keys[s.id] = []handoff.TrustedKey{signers[i].Key()}
		agents[i] = &demoAgent{name: s.name, id: s.id, key: key, kid: signers[i].Key().KID}
	}
	trust, err := handoff.NewTrust(keys)
	if err != nil {
		return nil, nil, err
	}
	for i, a := range agents {
		cfg := handoff.Config{ID: a.id, Signer: signers[i], Trust: trust, Now: d.clock.now}
		if a.id == demoCoder {
			cfg.Chain = handoff.ChainPolicy{RequireFull: true, TrustedOrigins: []handoff.AgentID{demoAssistant}}
			cfg.Refs = ref.CheckRequired
		}
		if a.agent, err = handoff.NewAgent(cfg); err != nil {
			return nil, nil, err
		}
	}
	return agents, trust, nil
}

func trustedAlg(a *demoAgent) string {
	alg, _ := keyAlg(a.key.Public())
	return alg
}

// deliver hands a signed status to the agent it is for and checks the
// state it leads to.
func (d *demo) deliver(to *demoAgent, st handoff.Signed, want state.State, path string) error {
	res, err := to.agent.HandleStatus(context.Background(), st.Octets)
	if err != nil {
		return fmt.Errorf("%s: status %q: %w", path, want, err)
	}
	if res.State != want || res.Conflict {
		return fmt.Errorf("%s: hop state %q after %q (conflict %t)", path, res.State, want, res.Conflict)
	}
	d.say("   %s: status %q; %s verifies it, hop now %s", path, res.Status.State, to.name, res.State)
	return nil
}

func (d *demo) expectAccepted(who string, in *handoff.Received, chain handoff.ChainState) error {
	if !in.Accepted() {
		return fmt.Errorf("%s: not accepted: %s: %s", who, in.Reason(), in.Detail())
	}
	if in.Chain() != chain {
		return fmt.Errorf("%s: chain %s, want %s", who, in.Chain(), chain)
	}
	return nil
}

// tamper changes the task inside the signed offer's payload without
// re-signing, and returns the Handoff object with that offer.
func tamper(h *handoff.Handoff, enc handoff.Encoding) ([]byte, error) {
	octets := bytes.Clone(h.Offer.Octets)
	switch h.Offer.Format {
	case handoff.JWS:
		parts := bytes.Split(octets, []byte{'.'})
		if len(parts) != 3 {
			return nil, fmt.Errorf("tamper: not a JWS")
		}
		p, err := base64.RawURLEncoding.DecodeString(string(parts[1]))
		if err != nil {
			return nil, err
		}
		p = bytes.Replace(p, []byte(demoTask), []byte(demoEvilTask), 1)
		parts[1] = []byte(base64.RawURLEncoding.EncodeToString(p))
		octets = bytes.Join(parts, []byte{'.'})
	default:
		octets = bytes.Replace(octets, []byte(demoTask), []byte(demoEvilTask), 1)
	}
	if bytes.Equal(octets, h.Offer.Octets) {
		return nil, fmt.Errorf("tamper: task not found in the offer")
	}
	t := &handoff.Handoff{Offer: handoff.Signed{Format: h.Offer.Format, Octets: octets}, Chain: h.Chain}
	return t.Encode(enc)
}

func (d *demo) saveFile(name string, data []byte) error {
	if d.saveDir == "" {
		return nil
	}
	if err := os.WriteFile(filepath.Join(d.saveDir, name), data, 0o644); err != nil {
		return demoIOError{err}
	}
	return nil
}

// saveKeys writes each agent's private JWK (mode 0600) and the trust file.
func (d *demo) saveKeys(agents []*demoAgent, trust *handoff.Trust) error {
	doc := map[string]map[string][]json.RawMessage{}
	for _, a := range agents {
		priv, _, err := privateJWK(a.key)
		if err != nil {
			return err
		}
		if err := writePrivate(filepath.Join(d.saveDir, a.name+".jwk"), indentJSON(priv), true); err != nil {
			return demoIOError{err}
		}
		for _, k := range trust.Keys(a.id) {
			pub, err := keyset.PublicJWK(k)
			if err != nil {
				return err
			}
			doc[string(a.id)] = map[string][]json.RawMessage{"keys": {pub}}
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return d.saveFile("trust.json", append(b, '\n'))
}
