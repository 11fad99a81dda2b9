// Package contract is the Agent Handoff Evidence Contract's own test, run
// against each host a delegate is served through: A2A 1.0 (a2a1hop), MCP
// (mcphop) and ADK Go over A2A 1.0 (adkhop). The contract says:
//
//	Test the package with a receiver that has no hidden session history.
//	Confirm evidence links resolve, restricted data is absent, permissions
//	match enforcement, external state is current, and the next action
//	cannot silently exceed scope. Exercise rejection, timeout,
//	cancellation, and return-to-sender paths. Preserve the final
//	acknowledgement and disposition in the system of record.
//
// The package has tests only. In each, the delegate is a separate process,
// the test binary started again, fresh for every run, with no state but
// its files: its replay store and the delegator records (replay/boltstore),
// its authority ledger (evidence/authority/boltauthority), the sealing key
// of its pauses, and the system of record the packages cite (a ledger of
// invoices, one file per entry). Every offer carries its handoff package,
// which the delegate's middleware checks before any work. The runs are:
//
//   - the main run: an allowed action done once (a retransmission does not
//     do it again); a denied action, an action the package does not list
//     and an effect the package says was already done, each refused,
//     ending its hop; a must-ask action paused for its owner, approved,
//     resumed and done once; and two packages rejected before any work:
//     one citing a ledger entry that is no longer current, one carrying a
//     credential;
//   - a timeout: the must-ask action's approval comes after the offer
//     expired, and nothing runs; the package's timeout names its owner;
//   - a cancellation: the delegator cancels the paused hop (MCP: a call in
//     flight), whose work took no effect: the delegate ends it "failed",
//     no refs, knowing it from its authority ledger (A2A, ADK) or from
//     the tool's report (MCP);
//   - return to sender: the specialist returns its result as the hop's
//     "completed", naming the result by digest (evidence.CheckResult).
//
// At the end every hop's final acknowledgement and disposition are read
// back from the files: the delegate's authority ledger
// (authority.Ledger.Hop: the acknowledgement with its package, the final
// disposition, whether the hop took an effect), its replay store
// (evidence.Recorded), and the delegator's own hop store (Agent.Hop),
// each opened anew. The ledger's final disposition is the hop's first
// terminal state: for a canceled hop the delegator's "canceled", the
// revocation recorded as it is applied, while the delegate's outcome that
// follows ("failed", no refs) is the hop's last status in both parties'
// stores.
package contract
