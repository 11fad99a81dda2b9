package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/veraison/go-cose"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/learnlog"
	"github.com/agentproto/handoff/ref"
	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/boltstore"
	"github.com/agentproto/handoff/scitt"
)

// verifyOutput is the one JSON object verify prints. Its members are a
// contract: see docs/cli.md.
type verifyOutput struct {
	Accepted       bool       `json:"accepted"`
	Retransmission bool       `json:"retransmission"`
	Reason         string     `json:"reason"`
	Detail         string     `json:"detail"`
	Equivocation   string     `json:"equivocation"`
	OfferDigest    string     `json:"offer_digest"`
	FirstDigest    string     `json:"first_digest"`
	OfferVerified  bool       `json:"offer_verified"`
	Iss            string     `json:"iss"`
	Aud            string     `json:"aud"`
	Hop            string     `json:"hop"`
	Dialog         string     `json:"dialog"`
	Task           string     `json:"task"`
	Iat            *uint64    `json:"iat"`
	Exp            *uint64    `json:"exp"`
	Chain          string     `json:"chain"`
	Links          []linkOut  `json:"links"`
	Refs           []refOut   `json:"refs"`
	Checks         []checkOut `json:"checks"`
	Now            int64      `json:"now"`

	// why is the refusal's message after its reason, for --summary: the
	// detail with where in the chain, said once (not printed in JSON).
	why string
}

type linkOut struct {
	Digest   string `json:"digest"`
	Iss      string `json:"iss"`
	Aud      string `json:"aud"`
	Hop      string `json:"hop"`
	Verified bool   `json:"verified"`
}

type checkOut struct {
	Step   int    `json:"step"`
	Check  string `json:"check"`
	Result string `json:"result"`
}

// The seven checks of section 5.1, in order.
var checkNames = [...]string{"signature", "audience", "freshness", "memory", "dialog", "chain", "refs"}

func runVerify(e *env, args []string) int {
	fset := newFlagSet("verify")
	self := fset.String("self", "", "this receiver's `AGENTID`: offers must name it as aud (required)")
	trustFlags := addTrustFlags(fset)
	now := &unixFlag{}
	fset.Var(now, "now", "evaluation time in `UNIX` seconds (default: the clock)")
	dialog := fset.String("dialog", "", "the host dialog `ID`; when absent the dialog check is skipped")
	skew := &secondsFlag{d: defaultSkew}
	fset.Var(skew, "skew", "clock skew allowed, in `SECONDS` (0 allows none)")
	maxLife := &secondsFlag{d: defaultMaxLifetime}
	fset.Var(maxLife, "max-lifetime", "longest exp - iat accepted, in `SECONDS`")
	maxChain := fset.Int("max-chain", defaultMaxChain, "longest chain accepted; a longer one is rejected as too-deep (0 accepts no chain)")
	requireChain := fset.Bool("require-chain", false, "reject with \"policy\" unless the chain is full: verified back to its start")
	var origins, reentry listFlag
	fset.Var(&origins, "trusted-origin", "require a full chain that starts at `ID` (repeatable; HC-58)")
	fset.Var(&reentry, "allow-reentry", "`ID` may appear more than once in a chain without a cycle (repeatable; HC-49)")
	structureFirst := fset.Bool("structure-first", false, "check a chain's links, continuity, timing and cycles before any element's signature: "+
		"a broken chain costs no signature work, and is reported as broken where the draft's order reports a bad signature too (opt-in profile)")
	lostAt := &unixFlag{}
	fset.Var(lostAt, "memory-lost-at", "the receiver lost its (iss, hop) memory at `UNIX` seconds: older offers are replays until they cannot be fresh (HC-59)")
	replayDB := fset.String("replay-db", "", "bbolt `FILE` keeping the (iss, hop) memory across runs; created when missing "+
		"(default: memory that lasts this run only)")
	refsPolicy := fset.String("refs", "not-checked", "reference `POLICY`: not-checked, available (check what --ref-object supplies; a mismatch rejects) "+
		"or required (every reference must verify); default available when --ref-object is given")
	var refObjects, refSalts listFlag
	fset.Var(&refObjects, "ref-object", "FILE holds the object of the references whose loc is LOC (`LOC=FILE`, repeatable)")
	fset.Var(&refSalts, "ref-salt", "SALT is the base64url salt delivered with the object at LOC, for \"salted-digest\" (`LOC=SALT`, repeatable)")
	var scittKeys, learnlogKeys listFlag
	fset.Var(&scittKeys, "scitt-key", "check \"scitt-receipt\" references (appendix A): FILE is a JWK or JWK Set of transparency-service public keys "+
		"to trust for receipts; a JWK kid is the base64url of the receipt's COSE kid, alg defaults to ES256; the Signed Statement comes "+
		"from --ref-object (`FILE`, repeatable)")
	fset.Var(&learnlogKeys, "learnlog-key", "check \"learnlog-head\" references (appendix B): FILE is a JWK or JWK Set of public keys to trust "+
		"for the record's producer; a head's kid must be a key's JWK Thumbprint, alg defaults to ES256 (`FILE`, repeatable)")
	summary := fset.Bool("summary", false, "print one line instead of the JSON object: the verdict, the reason and the check that "+
		"decided, and the offer (same exit status)")
	usage := func() string {
		return usageText(fset, `Usage: handoff verify --self AGENTID --trust TRUST.json [--now UNIX] [--dialog ID]
                      [--trust-url AGENT=URL]... [--trust-doc-url URL] [--trust-cache FILE]
                      [--skew 60] [--max-lifetime 300] [--max-chain 16]
                      [--require-chain] [--trusted-origin ID]... [--allow-reentry ID]...
                      [--structure-first] [--memory-lost-at UNIX] [--replay-db FILE]
                      [--refs POLICY] [--ref-object LOC=FILE]... [--ref-salt LOC=SALT]...
                      [--scitt-key FILE]... [--learnlog-key FILE]... [--summary] HANDOFF_FILE|-

Runs the receive checks of the draft (section 5.1) on a Handoff object, JSON
or CBOR (detected; "-" reads stdin), as the agent --self: signature with a
key TRUST.json binds to iss, audience, freshness, (iss, hop) memory,
dialog, chain, references. The first failure ends processing.

Prints exactly one JSON object on stdout: "accepted", "retransmission",
"reason" (the draft's reason code; "" when accepted or a retransmission),
"detail", "equivocation", "offer_digest", "chain", "iss", "aud", "hop",
"dialog", "refs", "checks" and more (see docs/cli.md).

With --summary, prints one line instead: "accepted: ...", "retransmission:
...", or "refused: REASON at check N (NAME): DETAIL".

Exit status: 0 accepted; 1 not accepted, including a retransmission and
equivocation; 2 usage or I/O error (message on stderr, nothing on stdout).

Without --replay-db the memory of hops lasts this run only: only a
--replay-db catches a replay across runs. An offer that passed the first
three checks is remembered even when a later check rejects it.

References: "digest" and "salted-digest" are checked against the objects
--ref-object supplies. "scitt-receipt" is checked only with --scitt-key: dig
against the Signed Statement supplied by --ref-object, then the receipt's
signature and inclusion proof. "learnlog-head" is checked only with
--learnlog-key: dig over the head's JCS form, then its signature. Any other
kind is unverifiable. A verified receipt shows the statement was registered,
not that it is true; a verified head does not show the record is complete.`, `  handoff verify --self spiffe://b.example/agent/coder --trust trust.json h.json
  handoff verify --self spiffe://b.example/agent/coder --trust trust.json \
      --now 1793000003 --dialog ctx-7c1e --require-chain handoff.json
  # memory across runs: the second run reports a retransmission (exit 1)
  handoff verify --self B --trust trust.json --replay-db seen.db h.json
  handoff verify --self B --trust trust.json --replay-db seen.db h.json
  # check a reference against the object delivered with the task
  handoff verify --self B --trust trust.json --ref-object https://a.example/ctx/9=issue.json h.json
  # a SCITT receipt and a Learnlog head, every reference required
  handoff verify --self B --trust trust.json --refs required --scitt-key ts.jwk \
      --ref-object https://ts.example/entries/4=statement.cbor --learnlog-key producer.jwk h.json
  # keys fetched from where each agent publishes them, cached between runs
  handoff verify --self B --trust-url A=https://a.example/.well-known/jwks.json \
      --trust-cache keys.cache h.json
  cat h.json | handoff verify --self B --trust trust.json -
  # one line for a person or a log
  handoff verify --self B --trust trust.json --summary h.json`)
	}
	pos, code, ok := e.parse(fset, usage, args)
	if !ok {
		return code
	}
	const cmd = "verify"
	explicit := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	switch {
	case len(pos) == 0:
		return e.usagef(cmd, "HANDOFF_FILE (or - for stdin) is required")
	case len(pos) > 1:
		return e.usagef(cmd, "one HANDOFF_FILE expected, got %d arguments", len(pos))
	case *self == "":
		return e.usagef(cmd, "--self is required")
	case trustFlags.problem() != "":
		return e.usagef(cmd, "%s", trustFlags.problem())
	case *maxChain < 0:
		return e.usagef(cmd, "--max-chain must not be negative")
	}
	var refPol ref.Policy
	switch *refsPolicy {
	case "not-checked":
		refPol = ref.CheckNone
		if len(refObjects)+len(scittKeys)+len(learnlogKeys) > 0 && !explicit["refs"] {
			refPol = ref.CheckAvailable
		}
	case "available":
		refPol = ref.CheckAvailable
	case "required":
		refPol = ref.CheckRequired
	default:
		return e.usagef(cmd, "--refs %q: want not-checked, available or required", *refsPolicy)
	}
	objects, err := refObjectsFrom(refObjects, refSalts)
	if err != nil {
		return e.usagef(cmd, "%v", err)
	}
	checkers, err := refCheckersFrom(scittKeys, learnlogKeys)
	if err != nil {
		return e.usagef(cmd, "%v", err)
	}

	trust, done, code, ok := trustFlags.load(e, cmd)
	if !ok {
		return code
	}
	defer done()
	data, err := e.readInput(pos[0])
	if err != nil {
		return e.failf(cmd, "%v", err)
	}

	// verify signs nothing, but an Agent needs a Signer: an ephemeral key
	// that leaves no trace.
	ephemeral, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	signer, err := handoff.NewSigner(ephemeral, handoff.JWS, nil)
	if err != nil {
		return e.failf(cmd, "%v", err)
	}
	clock := now.clock()
	var store replay.Store
	if *replayDB != "" {
		// A file that did not exist starts with no history. The store is
		// durable, so nothing was lost: Config.MemoryLostAt stays zero.
		// No background reclaimer: it would delete by the --now clock, and
		// a run evaluated in the future must not erase records that are
		// still live by the real clock.
		bs, err := boltstore.Open(*replayDB, boltstore.Options{Now: clock, ReclaimEvery: -1})
		if err != nil {
			return e.failf(cmd, "--replay-db: %v", err)
		}
		store = bs
	} else {
		store = replay.NewMemory(replay.MemoryOptions{Now: clock})
	}
	lim := handoff.Limits{MaxChain: new(*maxChain)}
	agent, err := handoff.NewAgent(handoff.Config{
		ID: handoff.AgentID(*self), Signer: signer, Trust: trust, Store: store, Now: clock,
		Skew: new(skew.d), MaxLifetime: new(maxLife.d), Limits: lim,
		Chain: handoff.ChainPolicy{RequireFull: *requireChain, TrustedOrigins: agentIDs(origins), AllowReentry: agentIDs(reentry),
			StructureFirst: *structureFirst},
		MemoryLostAt: lostAt.time(),
		Refs:         refPol,
		RefSource:    ref.ByLoc(objects),
		RefCheckers:  checkers,
		// verify only receives: its signer is ephemeral and signs nothing
		// a peer verifies, so the trust document need not bind it.
		TrustLacksSigner: true,
	})
	if err != nil {
		store.Close()
		return e.failf(cmd, "%v", err)
	}
	r, err := agent.Receive(context.Background(), data, handoff.Host{Dialog: *dialog})
	// Close before printing: an answer is printed only once the memory
	// of it is safely stored.
	if cerr := store.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing --replay-db: %w", cerr)
	}
	if err != nil {
		return e.failf(cmd, "replay store: %v", err)
	}
	res := verifyResult(r, trust, lim, clock(), *dialog != "", refPol)
	if *summary {
		if _, err := fmt.Fprintln(e.stdout, summaryLine(res)); err != nil {
			return e.failf(cmd, "%v", err)
		}
	} else if err := e.printJSON(res); err != nil {
		return e.failf(cmd, "%v", err)
	}
	if res.Accepted {
		return exitOK
	}
	return exitNo
}

// refObjectsFrom reads the --ref-object files and attaches --ref-salt
// salts, keyed by loc.
func refObjectsFrom(objects, salts []string) (map[string]ref.Object, error) {
	m := map[string]ref.Object{}
	for _, spec := range objects {
		loc, file, ok := cutSpec(spec)
		if !ok || loc == "" || file == "" {
			return nil, fmt.Errorf("--ref-object %q: want LOC=FILE", spec)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--ref-object: %v", err)
		}
		m[loc] = ref.Object{Octets: b}
	}
	for _, spec := range salts {
		loc, s, ok := cutSpec(spec)
		if !ok || loc == "" || s == "" {
			return nil, fmt.Errorf("--ref-salt %q: want LOC=SALT", spec)
		}
		obj, found := m[loc]
		if !found {
			return nil, fmt.Errorf("--ref-salt %q: no --ref-object for loc %q", spec, loc)
		}
		salt, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("--ref-salt %q: not base64url without padding", spec)
		}
		obj.Salt = salt
		m[loc] = obj
	}
	return m, nil
}

// refCheckersFrom builds the checkers of the optional reference kinds from
// the --scitt-key and --learnlog-key files. A kind whose flag is absent
// has no checker, so its references are unverifiable.
func refCheckersFrom(scittFiles, learnlogFiles []string) (ref.Checkers, error) {
	cs := ref.Checkers{}
	if len(scittFiles) > 0 {
		c := &scitt.Checker{}
		for _, f := range scittFiles {
			keys, err := readJWKs("--scitt-key", f)
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				alg, ok := coseAlgs[jwkAlg(k)]
				if !ok {
					return nil, fmt.Errorf("--scitt-key %s: alg %q: want ES256, ES384, ES512 or EdDSA", f, k.Algorithm)
				}
				kid, err := base64.RawURLEncoding.DecodeString(k.KeyID)
				if err != nil {
					return nil, fmt.Errorf("--scitt-key %s: kid %q is not base64url without padding", f, k.KeyID)
				}
				c.Keys = append(c.Keys, scitt.Key{KID: kid, Alg: alg, Public: k.Key})
			}
		}
		cs[ref.KindSCITTReceipt] = c
	}
	if len(learnlogFiles) > 0 {
		c := &learnlog.Checker{}
		for _, f := range learnlogFiles {
			keys, err := readJWKs("--learnlog-key", f)
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				alg := jwkAlg(k)
				if _, ok := coseAlgs[alg]; !ok {
					return nil, fmt.Errorf("--learnlog-key %s: alg %q: want ES256, ES384, ES512 or EdDSA", f, k.Algorithm)
				}
				c.Keys = append(c.Keys, learnlog.Key{Public: k.Key, Alg: jose.SignatureAlgorithm(alg)})
			}
		}
		cs[ref.KindLearnlogHead] = c
	}
	return cs, nil
}

// coseAlgs are the asymmetric algorithms the two kinds' flags accept, by
// JOSE name, with their COSE values.
var coseAlgs = map[string]cose.Algorithm{
	"ES256": cose.AlgorithmES256, "ES384": cose.AlgorithmES384, "ES512": cose.AlgorithmES512, "EdDSA": cose.AlgorithmEdDSA,
}

func jwkAlg(k jose.JSONWebKey) string {
	if k.Algorithm == "" {
		return "ES256"
	}
	return k.Algorithm
}

// readJWKs reads a JWK or a JWK Set of public keys. A private JWK is
// refused: only public keys belong in a trust list.
func readJWKs(flagName, path string) ([]jose.JSONWebKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", flagName, err)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("%s %s: not a JSON object: %v", flagName, path, err)
	}
	var keys []jose.JSONWebKey
	if _, ok := probe["keys"]; ok {
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(b, &set); err != nil {
			return nil, fmt.Errorf("%s %s: %v", flagName, path, err)
		}
		keys = set.Keys
	} else {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(b); err != nil {
			return nil, fmt.Errorf("%s %s: %v", flagName, path, err)
		}
		keys = []jose.JSONWebKey{k}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s %s: no key", flagName, path)
	}
	for _, k := range keys {
		if !k.Valid() || !k.IsPublic() {
			return nil, fmt.Errorf("%s %s: want public keys only", flagName, path)
		}
	}
	return keys, nil
}

// verifyResult turns a Received into the output object.
func verifyResult(r *handoff.Received, trust *handoff.Trust, lim handoff.Limits, now time.Time, dialogGiven bool, refPol ref.Policy) *verifyOutput {
	out := &verifyOutput{
		Accepted:       r.Accepted(),
		Retransmission: r.Retransmission(),
		Reason:         string(r.Reason()),
		Detail:         r.Detail(),
		Equivocation:   string(r.Equivocation()),
		OfferDigest:    digestOut(r.Digest()),
		FirstDigest:    digestOut(r.First()),
		Chain:          string(r.Chain()),
		Links:          []linkOut{},
		Now:            now.Unix(),
	}
	// The offer's own signature verified unless check 1 decided; a bad
	// signature inside the chain is check 6.
	out.OfferVerified = r.Offer() != nil || r.Refused() != nil
	refs := r.Refs()
	// An offer whose signature did not verify is shown for diagnosis, its
	// members marked by offer_verified false.
	if o := r.Unverified(); o != nil {
		out.Iss, out.Aud, out.Hop, out.Dialog, out.Task = string(o.Iss), string(o.Aud), string(o.Hop), o.Dialog, o.Task
		iat, exp := uint64(o.Iat), uint64(o.Exp)
		out.Iat, out.Exp = &iat, &exp
		if refs == nil {
			refs = notChecked(o.Refs)
		}
	}
	out.Refs = refsOut(refs)
	for _, l := range r.Links() {
		lo := linkOut{Digest: digestOut(l.Digest), Verified: l.Verified}
		if o := l.Unverified(); o != nil { // shown; verified says whether to believe it
			lo.Iss, lo.Aud, lo.Hop = string(o.Iss), string(o.Aud), string(o.Hop)
		}
		out.Links = append(out.Links, lo)
	}
	out.Checks = checksOf(r, dialogGiven, refPol)
	if err := r.Err(); err != nil {
		out.why = strings.TrimPrefix(err.Error(), "handoff: rejected: "+out.Reason+": ")
	}
	return out
}

// summaryLine is the one line --summary prints: the verdict first, then
// what decided it. Members of an offer whose signature did not verify are
// marked so, and text with a control character is quoted (safe), so that
// nothing from the input breaks the line.
func summaryLine(res *verifyOutput) string {
	var b strings.Builder
	who := func() {
		if res.Iss == "" {
			return
		}
		fmt.Fprintf(&b, " from %s to %s, hop %s", safe(res.Iss), safe(res.Aud), safe(res.Hop))
		if !res.OfferVerified {
			b.WriteString(" (UNVERIFIED)")
		}
	}
	switch {
	case res.Accepted:
		fmt.Fprintf(&b, "accepted: offer %s", res.OfferDigest)
		who()
		fmt.Fprintf(&b, ", chain %s", res.Chain)
	case res.Retransmission:
		fmt.Fprintf(&b, "retransmission: offer %s", res.OfferDigest)
		who()
		b.WriteString(", already received; not processed again")
	default:
		fmt.Fprintf(&b, "refused: %s", res.Reason)
		for _, c := range res.Checks {
			if c.Result == "fail" {
				fmt.Fprintf(&b, " at check %d (%s)", c.Step, c.Check)
				break
			}
		}
		why := res.why
		if why == "" {
			why = res.Detail
		}
		if why != "" {
			b.WriteString(": " + safe(why))
		}
	}
	return b.String()
}

// checksOf reports what each of the seven checks did: "pass", "fail",
// "skipped" (did not apply), "not-run" (an earlier check ended processing)
// or, for the memory check, "retransmission".
func checksOf(r *handoff.Received, dialogGiven bool, refPol ref.Policy) []checkOut {
	failed := int(r.Check()) // the step that ended processing; 0: none
	stopResult := "fail"
	if r.Retransmission() {
		stopResult = "retransmission"
	}
	remembered := r.Retransmission() || r.Equivocation() != ""
	out := make([]checkOut, len(checkNames))
	for i, name := range checkNames {
		step := i + 1
		res := "pass"
		switch {
		case failed != 0 && step == failed:
			res = stopResult
		case failed != 0 && step > failed:
			res = "not-run"
		case step == 3 && remembered:
			res = "skipped" // freshness is not checked for a remembered hop
		case step == 5 && !dialogGiven:
			res = "skipped"
		case step == 7 && refPol == ref.CheckNone:
			res = "skipped"
		}
		out[i] = checkOut{Step: step, Check: name, Result: res}
	}
	return out
}

func agentIDs(ids []string) []handoff.AgentID {
	out := make([]handoff.AgentID, len(ids))
	for i, id := range ids {
		out[i] = handoff.AgentID(id)
	}
	return out
}
