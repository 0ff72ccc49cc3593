// Package ilink is a client for the WeChat iLink bot HTTP API (the API used by
// Tencent's OpenClaw Weixin channel plugin).
//
// It covers every endpoint: the long-poll getupdates, sendmessage (text,
// image, file, video; one item per request), getuploadurl with the CDN upload,
// inbound media download and decryption, getconfig, sendtyping,
// msg/notifystart, msg/notifystop, and the QR login endpoints
// get_bot_qrcode and get_qrcode_status.
//
// Requests carry the same headers and base_info envelope as the official
// plugin. Message ids are decoded losslessly as uint64 (see [ID] and
// [StringID]). Every failure is an [*Error] with a stable [Code]; use
// [IsRetryable], [IsOutcomeUnknown], [MayHaveTakenEffect] and errors.Is with
// the sentinel errors ([ErrStaleToken], [ErrRejected], ...) to classify it.
// Secrets (bot token, context token, typing ticket, AES keys) are held in
// [Secret], which never prints its value.
package ilink
