//go:build tools

// Package tools pins the etcd command this module builds, so that
// `go mod tidy` keeps its dependencies in go.mod and go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
