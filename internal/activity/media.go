package activity

import (
	"context"
	"errors"
	"net/http"

	"github.com/ilinkflow/ilinkflow/activities"
	"github.com/ilinkflow/ilinkflow/internal/ilink"
	"github.com/ilinkflow/ilinkflow/sealing"
)

// MediaFetcher downloads and decrypts inbound media by its sealed-at-rest locator (what
// store.GetAttachment opens). It is not an activity: the reply API calls it, so media
// bytes never pass through Temporal.
type MediaFetcher struct {
	// Client is the iLink client configuration (its CDN base, timeouts and HTTP client);
	// MaxMediaBytes caps a download.
	Client ilink.Config
	// NewClient builds the client (nil: ilink.New).
	NewClient func(cfg ilink.Config, token ilink.Secret) (*ilink.Client, error)
}

// Fetch downloads and decrypts the media a locator names.
func (f *MediaFetcher) Fetch(ctx context.Context, locator sealing.Secret) ([]byte, error) {
	it, err := OpenImageLocator(locator)
	if err != nil {
		return nil, &activities.MediaError{Code: activities.MediaBadLocator}
	}
	var cl *ilink.Client
	if f.NewClient != nil {
		cl, err = f.NewClient(f.Client, "")
	} else {
		cl, err = ilink.New(f.Client, "")
	}
	if err != nil {
		return nil, &activities.MediaError{Code: activities.MediaUnavailable}
	}
	data, err := cl.DownloadItem(ctx, it)
	if err == nil {
		return data, nil
	}
	var ie *ilink.Error
	errors.As(err, &ie)
	switch ilink.CodeOf(err) {
	case ilink.CodeBodyTooLarge:
		return nil, &activities.MediaError{Code: activities.MediaTooLarge}
	case ilink.CodeMedia:
		return nil, &activities.MediaError{Code: activities.MediaUndecryptable}
	case ilink.CodeInvalidInput:
		return nil, &activities.MediaError{Code: activities.MediaBadLocator}
	case ilink.CodeHTTPStatus:
		if ie != nil && ie.Status >= 400 && ie.Status < 500 && ie.Status != http.StatusTooManyRequests {
			return nil, &activities.MediaError{Code: activities.MediaGone, Status: ie.Status}
		}
		if ie != nil {
			return nil, &activities.MediaError{Code: activities.MediaUnavailable, Status: ie.Status}
		}
	}
	return nil, &activities.MediaError{Code: activities.MediaUnavailable}
}
