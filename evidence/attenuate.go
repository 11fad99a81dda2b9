package evidence

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/ref"
)

// Attenuation along the chain (evidence contract: "Guardrails at one agent
// boundary do not automatically protect every downstream tool or handoff";
// "the next action cannot silently exceed scope"). A delegate's package
// stays within the authority of every earlier hop's package, which the
// check compares when CheckConfig.Ancestors obtains it; a chain that names
// packages checked without Ancestors fails ("ancestors-not-supplied"):
//
//   - each allowed action is allowed by the ancestor;
//   - each must-ask action is allowed or must-ask for the ancestor, so a
//     must-ask stays must-ask or becomes denied, never allowed;
//   - every action the ancestor denied is denied;
//   - nothing outlives the ancestor's offer: the guard refuses once the
//     earliest exp of the offer and its ancestors has passed.
//
// Names compare exactly here, as they do in the guard; entries that differ
// only in case, Unicode normalisation or surrounding space are reported as
// ambiguous by the check of each package on its own.

// ErrWidened: Build was asked for a package that widens the authority its
// delegator received (BuildOptions.Within). The error is a *WidenedError.
var ErrWidened = errors.New("evidence: package widens the authority it was given")

// Widening is one way a package exceeds an ancestor's authority: the JSON
// Pointer of the entry (or of the list that lacks one) and what is wrong.
type Widening struct {
	Path   string
	Detail string
}

// WidenedError lists the widenings Build refused.
type WidenedError struct{ Widenings []Widening }

func (e *WidenedError) Error() string {
	var b strings.Builder
	b.WriteString(ErrWidened.Error())
	for _, w := range e.Widenings {
		fmt.Fprintf(&b, "; %s: %s", w.Path, w.Detail)
	}
	return b.String()
}

func (e *WidenedError) Unwrap() error { return ErrWidened }

func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Widen reports where own exceeds ancestor (see the rules above), in the
// order of own's lists, then ancestor's denials.
func Widen(own, ancestor Authority) []Widening {
	allowed, mustAsk, denied := set(ancestor.Allowed), set(ancestor.MustAsk), set(ancestor.Denied)
	var out []Widening
	for j, a := range own.Allowed {
		switch {
		case allowed[a]:
		case mustAsk[a]:
			out = append(out, Widening{fmt.Sprintf("/authority/allowed/%d", j), fmt.Sprintf("%q is must-ask for the ancestor, not allowed", a)})
		case denied[a]:
			out = append(out, Widening{fmt.Sprintf("/authority/allowed/%d", j), fmt.Sprintf("%q is denied by the ancestor", a)})
		default:
			out = append(out, Widening{fmt.Sprintf("/authority/allowed/%d", j), fmt.Sprintf("%q is not allowed by the ancestor", a)})
		}
	}
	for j, m := range own.MustAsk {
		if !allowed[m] && !mustAsk[m] {
			out = append(out, Widening{fmt.Sprintf("/authority/must_ask/%d", j), fmt.Sprintf("%q is neither allowed nor must-ask for the ancestor", m)})
		}
	}
	ownDenied := set(own.Denied)
	for _, d := range ancestor.Denied {
		if !ownDenied[d] {
			out = append(out, Widening{"/authority/denied", fmt.Sprintf("the ancestor's denial of %q is dropped", d)})
		}
	}
	return out
}

// attenuation compares the package with the package of every earlier hop
// in in's chain, oldest first, obtained through cfg.Ancestors and checked
// by digest; it lowers the report's time bound to the earliest exp.
func (c *checker) attenuation(in *handoff.Received) {
	o := receivedOffer(in)
	links := in.Links()
	if o.Prev != nil && len(links) == 0 {
		c.ancestor("", "the offer names a prev but no chain was carried: its ancestors cannot be checked")
		return
	}
	for k, l := range links {
		lo := l.Offer()
		if lo == nil {
			c.ancestor("", "chain element %d did not verify: its package, if any, cannot be checked", k)
			continue
		}
		c.r.offerTime = min(c.r.offerTime, lo.Exp)
		refs := Refs(lo.Refs)
		if len(refs) > 0 && c.cfg.Ancestors == nil {
			// Never silent: without the packages the chain names, a
			// widening cannot be shown absent, so the check fails.
			c.add(CodeAncestorsNotSupplied, at(""), "chain element %d names a package and CheckConfig.Ancestors is nil: its authority was not compared", k)
			continue
		}
		for _, r := range refs {
			obj, err := c.cfg.Ancestors(c.ctx, r)
			if err != nil {
				c.ancestor("", "the package of chain element %d could not be obtained: %v", k, err)
				continue
			}
			res := CheckRef(r, obj, c.cfg.Decode)
			if res.Outcome != ref.Verified {
				c.ancestor("", "the package of chain element %d is %s: %s", k, res.Outcome, res.Detail)
				continue
			}
			anc, err := Decode(obj.Octets, c.cfg.Decode)
			if err != nil {
				c.ancestor("", "the package of chain element %d does not decode: %v", k, err)
				continue
			}
			c.r.ancestors = append(c.r.ancestors, anc.Authority)
			for _, w := range Widen(c.p.Authority, anc.Authority) {
				c.add(CodeWidened, at(w.Path), "beyond chain element %d: %s", k, w.Detail)
			}
		}
	}
}

func (c *checker) ancestor(path, format string, args ...any) {
	if c.cfg.RequireAncestors {
		c.add(CodeAncestorUnverifiable, at(path), format, args...)
	} else {
		c.advise(CodeAncestorUnverifiable, at(path), format, args...)
	}
}

// entryPos is an authority entry: its list (0 allowed, 1 must-ask, 2
// denied) in the top two bits, its index in the rest.
type entryPos uint32

func (e entryPos) list() int  { return int(e >> 30) }
func (e entryPos) index() int { return int(e & (1<<30 - 1)) }

// entries are the positions of every authority entry, sortable by a key.
type entries struct {
	lists [3][]string
	pos   []entryPos
}

func newEntries(lists [3][]string) *entries {
	es := &entries{lists: lists, pos: make([]entryPos, 0, len(lists[0])+len(lists[1])+len(lists[2]))}
	for l, names := range lists {
		for j := range names {
			es.pos = append(es.pos, entryPos(l)<<30|entryPos(j))
		}
	}
	return es
}

func (es *entries) name(e entryPos) string { return es.lists[e.list()][e.index()] }

// sort orders the entries by key, then by position.
func (es *entries) sort(key func(entryPos) string) {
	slices.SortFunc(es.pos, func(x, y entryPos) int {
		if c := strings.Compare(key(x), key(y)); c != 0 {
			return c
		}
		return int(x) - int(y)
	})
}

// has reports whether list holds name; the entries must be sorted by name.
func (es *entries) has(list int, name string) bool {
	i, _ := slices.BinarySearchFunc(es.pos, name, func(e entryPos, n string) int { return strings.Compare(es.name(e), n) })
	for ; i < len(es.pos) && es.name(es.pos[i]) == name; i++ {
		if es.pos[i].list() == list {
			return true
		}
	}
	return false
}

// ambiguityKey is how an action name is compared for ambiguity: trimmed
// of white space, in NFC, and simply case-folded (each rune replaced by
// the least rune of its unicode.SimpleFold orbit). It allocates only for
// a name that is not already its own key.
func ambiguityKey(s string) string {
	return strings.Map(foldRune, norm.NFC.String(strings.TrimSpace(s)))
}

func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

// ambiguous reports authority entries that differ as octets but collide
// once trimmed, case-folded and normalised to NFC: the guard compares
// exactly and would allow one spelling while denying the other. Each is
// reported at the later entry, against the first spelling of its key.
func (c *checker) ambiguous(es *entries) {
	changed := false
	for _, e := range es.pos {
		if n := es.name(e); ambiguityKey(n) != n {
			changed = true
			break
		}
	}
	if !changed {
		// Every name is its own key: two that collide are equal, which
		// the exact checks report.
		return
	}
	keys := make([]string, len(es.pos))
	for i, e := range es.pos {
		keys[i] = ambiguityKey(es.name(e))
	}
	byPos := make([]int32, len(es.pos))
	for i := range byPos {
		byPos[i] = int32(i)
	}
	slices.SortFunc(byPos, func(x, y int32) int {
		if c := strings.Compare(keys[x], keys[y]); c != 0 {
			return c
		}
		return int(es.pos[x]) - int(es.pos[y])
	})
	var hits []entryPos
	for i := 0; i < len(byPos); {
		first, j := byPos[i], i+1
		for ; j < len(byPos) && keys[byPos[j]] == keys[first]; j++ {
			if es.name(es.pos[byPos[j]]) != es.name(es.pos[first]) {
				hits = append(hits, es.pos[byPos[j]])
			}
		}
		i = j
	}
	slices.Sort(hits)
	names := [3]string{"allowed", "must_ask", "denied"}
	for _, h := range hits {
		c.add(CodeAmbiguous, idx("/authority/"+names[h.list()]+"/", h.index(), ""), "%q collides with another entry under trimming, case folding and NFC", es.name(h))
	}
}
