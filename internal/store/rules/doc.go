// Package rules holds the store's decisions, apart from the SQL that carries them out:
// which message of a conversation is newer and which window a page leaves open, how a
// page's messages merge into the deliverable one, whether a window accepts a send and
// what its quota still grants, when a bot's send may start (pacing), whether a
// reservation is refused, what a transmission's outcome and an agent's verdict do, in
// which order held replies go out, and what iLink's rejection of a send means.
//
// Every function takes values and returns values: the package imports no database
// code (no pgx, no sqlc output), reads no clock and writes nothing, so each rule is
// tested with a table and no database. The store (package store) reads what a decision
// needs under its locks, calls the rule and executes what it decides, one transaction
// per operation; see docs/architecture.md ("The store").
//
// A refusal is a *Refusal: a code of vocab and the words that explain it, which the
// store reports as its own typed error.
package rules
