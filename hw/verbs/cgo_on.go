//go:build cgo && (!linux || noverbs)

package verbs

const cgoEnabled = true
