// Package agui holds the small part of the AG-UI protocol vocabulary that the proxy needs to
// know by name: event types, the identifiers of threads and runs, and a strict decoder for the
// RunAgentInput body a client POSTs to start a run.
//
// The package is deliberately thin. Events travel through the proxy as raw JSON and are never
// re-encoded except where the proxy injects fields, so nothing here models a whole event; see
// package compact for the lossless event model used by compaction.
//
// Everything in this package is safe for concurrent use.
package agui
