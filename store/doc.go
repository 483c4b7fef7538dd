// Package store is the store SPI of protect, as database/sql/driver is
// database/sql's: what a store implements, and the helpers every store
// computes alike. It imports nothing of protect. The two shipped stores,
// package memstore (one process) and package redisstore (shared by every
// instance), import this package and nothing else of protect, so that a
// store written elsewhere (Postgres, DynamoDB) can do all that they do;
// package storetest checks one.
//
// # The seam
//
// A Protector binds its namespace and limits once, with Store.Space and a
// Scope, and from then on calls only the Space it got: Take for a
// request of the stream counter, TakePlan for a request under a Plan,
// and AddBan, Lift, Bans, Inspect and Publish for administration. Take
// and TakePlan each decide in one atomic step, per key: the ban check,
// the count, the threshold ban, or every limit of a plan at once. A
// store shared over a network makes one round trip for each.
//
// # Capabilities
//
// What a store offers beyond Store and Space it says by implementing
// optional interfaces, found by type assertion as io/fs finds ReadDirFS
// on an FS: LocalSpace (answers from this process: no deadline, no
// breaker), DeadlineSpace (needs only a context's deadline), BanHolder
// (answers held bans while the store cannot be asked), BanPager (lists
// and lifts a page at a time), RangeBanCounter, CircuitStore (one
// breaker for every protector on the store) and SetupChecker. A store
// with none of them still gets exact counts, bans, plans and the failure
// policy.
//
// # What every store computes alike
//
// So that every store answers alike, the arithmetic is here: BanLength
// (escalating bans), Plan.Decide and Plan.Charge with PlanResult.Fill
// (GCRA token buckets and calendar quotas, in whole microseconds;
// GCRASplit for a store that computes them elsewhere, as Redis does in
// Lua), CheckBan and CheckTakePlan (what a store refuses), RangeSet (the
// range bans every request is checked against), LimitsDiffer (a
// namespace bound twice to other numbers), and MalformedError (a record
// a store holds but cannot read, which is damage to that record, never a
// failure of the store).
package store
