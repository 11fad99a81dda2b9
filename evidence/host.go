package evidence

// HostConfig is how a host's middleware (mcphop, a2a1hop and a2a03hop, and
// adkhop through a2a1hop) checks the handoff package that travels beside
// an offer and guards the hop. The middleware runs CheckReceived with
// Check on the package right after the offer passed the receive checks,
// before any work: a package that fails, or none when one is required,
// gets "rejected" with reason "policy" (ReasonEvidence) and the failing
// findings in the detail (Report.Detail), and nothing runs. A package
// that passed gives the hop's guard (NewGuard with Guard), which the tool
// handler or executor finds under one name in every host:
// GuardFromContext. A retransmission that resumes the hop's work carries
// the same package (the offer's refs bind it by digest): it is checked
// again against the same verified offer, and the guard built again over
// the same ledger, so that a delegate restarted in between needs nothing
// but its stores.
type HostConfig struct {
	// Check configures the check of each package: the clock, the
	// resolvers of artifacts and ancestors' packages, the decoding limits.
	Check CheckConfig
	// Guard configures each hop's guard. Its Ledger, the authority
	// ledger every guard of the agent records effects and approvals in,
	// is required; make it durable or shared for a pause to outlive a
	// restart and for replicas to agree.
	Guard GuardConfig
	// AllowNoPackage serves an offer that names no package and comes
	// with none, with no guard in the handler's context. By default a
	// host configured to check packages refuses such an offer ("rejected",
	// "policy"), as it refuses, in any case, an offer whose refs name a
	// package that did not come with it: the zero value is the strict one,
	// so that no offer goes unchecked by omission where packages are
	// expected. A host that sets no HostConfig checks no package at all
	// and serves offers as before.
	AllowNoPackage bool
}
