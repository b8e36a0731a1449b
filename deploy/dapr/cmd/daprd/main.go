// daprd as Dapr releases it (the stable components, built from the pinned module), plus two
// components of components-contrib that the stable component set leaves out:
//
//   - the SQLite name resolver: local systems resolve app ids through a SQLite file in their
//     own run folder instead of machine-wide mDNS, so two systems started side by side on one
//     machine (`make run` and `make test`, or two test sessions) never reach each other's apps;
//   - the OpenAI conversation component (`conversation.openai`, with an `endpoint` for any
//     OpenAI-compatible server): the Dapr Conversation path to a real model, the local model
//     server of `make run MODEL=local` or a vendor.
package main

import (
	"github.com/dapr/components-contrib/conversation/openai"
	"github.com/dapr/components-contrib/nameresolution/sqlite"
	"github.com/dapr/dapr/cmd/daprd/app"
	"github.com/dapr/dapr/pkg/components/conversation"
	nameresolution "github.com/dapr/dapr/pkg/components/nameresolution"
)

func init() {
	nameresolution.DefaultRegistry.RegisterComponent(sqlite.NewResolver, "sqlite")
	conversation.DefaultRegistry.RegisterComponent(openai.NewOpenAI, "openai")
}

func main() {
	app.Run()
}
