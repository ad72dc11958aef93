// Package e2e holds the cross-language end-to-end tests: the official AG-UI TypeScript client
// (@ag-ui/client, pinned in package.json, installed with `npm ci` in this directory) runs
// every demo-agent scenario against the agent directly and through agui-proxy, and the Go
// tests require both to look the same to it. The package has no non-test code.
package e2e
