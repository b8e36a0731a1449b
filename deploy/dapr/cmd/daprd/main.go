// daprd as Dapr releases it (the stable components, built from the pinned module), plus the
// SQLite name resolver of components-contrib, which the stable component set leaves out.
//
// Local systems resolve app ids through a SQLite file in their own run folder instead of
// machine-wide mDNS, so two systems started side by side on one machine (`make run` and
// `make test`, or two test sessions) never reach each other's apps.
package main

import (
	"github.com/dapr/components-contrib/nameresolution/sqlite"
	"github.com/dapr/dapr/cmd/daprd/app"
	nameresolution "github.com/dapr/dapr/pkg/components/nameresolution"
)

func init() {
	nameresolution.DefaultRegistry.RegisterComponent(sqlite.NewResolver, "sqlite")
}

func main() {
	app.Run()
}
