package main

import (
	"os"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/ilinkflow/ilinkflow/payloadcodec"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// codecConverter is the data converter of the operator commands' Temporal clients: the
// payload codec of the sealing keys in the environment (ILINKFLOW_SEALING_KEYS or _FILE),
// as the worker uses, so what they send is encrypted and what they read decrypts
// (docs/payload-codec.md). Without keys, when the default dev key file of `starter dev`
// exists (mode 0600), it decodes with that file's keys but encodes nothing
// (devDecodeConverter), so these commands read what a `starter dev` worker answers
// without ever writing a payload that a worker with other keys could not read. Otherwise
// it is nil, the SDK's default: payloads go unencrypted and encrypted ones cannot be read.
// (`starter dev` dials its own client with its run's keys.)
func codecConverter() converter.DataConverter {
	keys, err := sealing.LoadKeyring(os.Getenv)
	if err != nil {
		return devDecodeConverter(defaultDevKeyFile())
	}
	dc, err := payloadcodec.DataConverter(keys)
	if err != nil {
		return nil
	}
	return dc
}

// devDecodeConverter is the SDK's default data converter with a codec that decodes with
// the keys of the dev key file at path and encodes nothing; nil when that file does not
// exist, is readable by others or holds no valid key (it is never created here).
func devDecodeConverter(path string) converter.DataConverter {
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	keys, err := sealing.ParseKeyring(strings.TrimSpace(string(b)))
	clear(b)
	if err != nil {
		return nil
	}
	codec, err := payloadcodec.New(keys)
	if err != nil {
		return nil
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), decodeOnly{codec})
}

// decodeOnly is a payload codec that decodes with its codec and leaves what it encodes
// as it is.
type decodeOnly struct{ codec *payloadcodec.Codec }

// Encode returns payloads unchanged.
func (decodeOnly) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return payloads, nil
}

// Decode decodes payloads with the codec (unencoded ones pass through).
func (d decodeOnly) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return d.codec.Decode(payloads)
}
