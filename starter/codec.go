package main

import (
	"os"

	"go.temporal.io/sdk/converter"

	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// codecConverter is the data converter of the commands' Temporal clients: the payload
// codec of the sealing keys in the environment (ILINKFLOW_SEALING_KEYS or _FILE), as the
// worker uses, so what they send is encrypted and what they read decrypts
// (docs/payload-codec.md). Without keys it is nil, the SDK's default: payloads go
// unencrypted and encrypted ones cannot be read. (The dev command then also runs its
// worker on this client, with a key for that run only: unencrypted, consistently.)
func codecConverter() converter.DataConverter {
	keys, err := sealing.LoadKeyring(os.Getenv)
	if err != nil {
		return nil
	}
	dc, err := payloadcodec.DataConverter(keys)
	if err != nil {
		return nil
	}
	return dc
}
