package evidence

import (
	"fmt"
	"unsafe"
)

// Before the package is decoded into its struct, its lists are sized from
// the tree canonicalize made, so that decoding appends without growing
// them, and what the decoding will allocate is estimated, so that a
// package whose decoded form would take more than maxDecodeFactor times
// its size is refused (ErrTooLarge) before it is decoded. Only packages of
// thousands of near-empty entries or unknown members come near the bound:
// every entry of a valid package has required members, which take more
// octets than its decoded struct takes multiples of.

// maxDecodeFactor and decodeAllowance bound the decoded form: at most
// maxDecodeFactor times the input, plus decodeAllowance, so that no small
// package is refused.
const (
	maxDecodeFactor = 6
	decodeAllowance = 16 << 10
)

// extraCost is what one unknown member costs in an Extra map, besides its
// octets: the map entry and its share of the map's growth.
const extraCost = 96

// authorityEntryCost is what one authority entry costs: its string header,
// and the check's index and ambiguity key.
const authorityEntryCost = 56

// growth is the factor of a slice grown by appending one element at a
// time (the sum of its successive capacities over its final length).
const growth = 5

// field describes a member of the package's schema: a nested object, a
// list of objects, or a list of strings.
type field struct {
	obj   *schema // an object
	list  *schema // a list of objects of this schema
	strs  bool    // a list of strings
	size  uintptr // for a list: the element's size
	outer bool    // a top-level list, which presize allocates in advance
}

// schema is an object of the package: its known members, and whether it
// keeps unknown ones (Extra).
type schema struct {
	members map[string]field
	extra   bool
}

var (
	scalars = func(names ...string) *schema {
		s := &schema{members: map[string]field{}, extra: true}
		for _, n := range names {
			s.members[n] = field{}
		}
		return s
	}
	withEvidence = func(s *schema) *schema {
		s.members["evidence"] = field{strs: true, size: unsafe.Sizeof("")}
		return s
	}
	wireRef = func() *schema {
		s := scalars("kind", "loc")
		s.members["dig"] = field{obj: &schema{members: map[string]field{"alg": {}, "val": {}}}}
		return s
	}()
	artifact = func() *schema {
		s := scalars("id", "proves")
		s.members["ref"] = field{obj: wireRef}
		return s
	}()
	authoritySchema = func() *schema {
		s := scalars()
		for _, n := range []string{"allowed", "must_ask", "denied"} {
			s.members[n] = field{strs: true, size: authorityEntryCost, outer: true}
		}
		return s
	}()
	ackSchema = func() *schema {
		s := scalars("decision", "reason")
		s.members["findings"] = field{strs: true, size: unsafe.Sizeof("")}
		return s
	}()
	packageSchema = &schema{extra: true, members: map[string]field{
		"handoff":          {obj: scalars("id", "time")},
		"sender":           {obj: scalars("role", "agent")},
		"receiver":         {obj: scalars("role", "agent")},
		"control":          {},
		"outcome":          {obj: scalars("result", "done_when")},
		"authority":        {obj: authoritySchema},
		"state":            {list: withEvidence(scalars("system", "state", "as_of")), size: unsafe.Sizeof(StateClaim{}), outer: true},
		"completed":        {list: withEvidence(scalars("action", "external", "operation_id", "idempotency_key", "hop", "postcondition")), size: unsafe.Sizeof(CompletedAction{}), outer: true},
		"artifacts":        {list: artifact, size: unsafe.Sizeof(Artifact{}), outer: true},
		"context_passed":   {list: scalars("name", "value"), size: unsafe.Sizeof(ContextItem{}), outer: true},
		"context_withheld": {list: scalars("item", "reason"), size: unsafe.Sizeof(Withheld{}), outer: true},
		"assumptions":      {list: scalars("item", "validation"), size: unsafe.Sizeof(Assumption{}), outer: true},
		"attempts":         {list: withEvidence(scalars("attempt", "result")), size: unsafe.Sizeof(Attempt{}), outer: true},
		"pending":          {list: scalars("kind", "item", "action", "owner"), size: unsafe.Sizeof(Pending{}), outer: true},
		"next_action":      {obj: scalars("action", "description")},
		"verification":     {obj: scalars("check")},
		"timeouts":         {list: scalars("condition", "owner", "at"), size: unsafe.Sizeof(Timeout{}), outer: true},
		"rollback":         {obj: scalars("method")},
		"acknowledgement":  {obj: ackSchema},
	}}
)

// presize sizes p's lists from the tree and refuses a package whose
// decoded form would exceed maxDecodeFactor times its size.
func presize(p *Package, c *canon, size int) error {
	cost := c.cost(0, packageSchema)
	if cost > uint64(maxDecodeFactor)*uint64(size)+decodeAllowance {
		return fmt.Errorf("%w: its entries would decode to about %d octets, over %d times its %d octets", ErrTooLarge, cost, maxDecodeFactor, size)
	}
	n := c.counts(0)
	if k := n["state"]; k > 0 {
		p.State = make([]StateClaim, 0, k)
	}
	if k := n["completed"]; k > 0 {
		p.Completed = make([]CompletedAction, 0, k)
	}
	if k := n["artifacts"]; k > 0 {
		p.Artifacts = make([]Artifact, 0, k)
	}
	if k := n["context_passed"]; k > 0 {
		p.Passed = make([]ContextItem, 0, k)
	}
	if k := n["context_withheld"]; k > 0 {
		p.Withheld = make([]Withheld, 0, k)
	}
	if k := n["assumptions"]; k > 0 {
		p.Assumptions = make([]Assumption, 0, k)
	}
	if k := n["attempts"]; k > 0 {
		p.Attempts = make([]Attempt, 0, k)
	}
	if k := n["pending"]; k > 0 {
		p.Pending = make([]Pending, 0, k)
	}
	if k := n["timeouts"]; k > 0 {
		p.Timeouts = make([]Timeout, 0, k)
	}
	if a, ok := c.member(0, "authority"); ok && c.nodes[a].kind == '{' {
		m := c.counts(a)
		if k := m["allowed"]; k > 0 {
			p.Authority.Allowed = make([]string, 0, k)
		}
		if k := m["must_ask"]; k > 0 {
			p.Authority.MustAsk = make([]string, 0, k)
		}
		if k := m["denied"]; k > 0 {
			p.Authority.Denied = make([]string, 0, k)
		}
	}
	return nil
}

// member returns the value node of object o's member name.
func (c *canon) member(o int32, name string) (int32, bool) {
	for nm := c.nodes[o].a; nm != noNode; {
		v := c.nodes[nm].next
		nd := c.nodes[nm]
		if string(c.arena[nd.a:nd.b]) == name {
			return v, true
		}
		nm = c.nodes[v].next
	}
	return noNode, false
}

// counts returns the number of elements of each array member of object o.
func (c *canon) counts(o int32) map[string]int {
	out := map[string]int{}
	for nm := c.nodes[o].a; nm != noNode; {
		v := c.nodes[nm].next
		if c.nodes[v].kind == '[' {
			nd := c.nodes[nm]
			out[string(c.arena[nd.a:nd.b])] = c.length(v)
		}
		nm = c.nodes[v].next
	}
	return out
}

func (c *canon) length(arr int32) int {
	n := 0
	for ch := c.nodes[arr].a; ch != noNode; ch = c.nodes[ch].next {
		n++
	}
	return n
}

// cost estimates what decoding object o by s allocates beyond its octets.
func (c *canon) cost(o int32, s *schema) uint64 {
	if c.nodes[o].kind != '{' {
		return 0
	}
	var total uint64
	for nm := c.nodes[o].a; nm != noNode; {
		v := c.nodes[nm].next
		nd := c.nodes[nm]
		f, known := s.members[string(c.arena[nd.a:nd.b])]
		switch {
		case !known:
			if s.extra {
				total += extraCost
			}
		case f.obj != nil:
			total += c.cost(v, f.obj)
		case f.list != nil && c.nodes[v].kind == '[':
			for el := c.nodes[v].a; el != noNode; el = c.nodes[el].next {
				total += uint64(f.size) + c.cost(el, f.list)
			}
		case f.strs && c.nodes[v].kind == '[':
			k := uint64(c.length(v)) * uint64(f.size)
			if !f.outer {
				k *= growth
			}
			total += k
		}
		nm = c.nodes[v].next
	}
	return total
}
