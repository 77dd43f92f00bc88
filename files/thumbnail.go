package files

import (
	"bufio"
	"bytes"
	"context"
	"image"
	"image/draw"
	_ "image/gif" // decoders registered for image.Decode
	"image/jpeg"
	"image/png"

	xdraw "golang.org/x/image/draw"
	_ "golang.org/x/image/webp"

	"parley"
)

// Thumbnails: an image's width and height are read from its header; one of
// at most MaxThumbnailPixels is decoded and scaled to fit ThumbnailSize,
// and stored beside it as PNG (when it has transparency) or JPEG.
const (
	ThumbnailSize = 360
	// MaxThumbnailPixels bounds the decode (a decompression bomb declares
	// a huge size in a small file): 40 MP is 160 MB of RGBA at most.
	MaxThumbnailPixels = 40_000_000
	// MaxThumbnailBytes: larger files are measured but not thumbnailed.
	MaxThumbnailBytes = 50 << 20
)

// CanThumbnail reports whether a content type is an image this package
// decodes.
func CanThumbnail(contentType string) bool { return Inline(contentType) }

// thumbnail fills f's width, height and thumbnail key from its stored
// bytes. A file that does not decode keeps none of them: it is still a
// file. It never fails the upload, and a decoder panic is logged.
func (s *Service) thumbnail(ctx context.Context, f *parley.File) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("files: thumbnail panicked", "file", f.ID, "panic", v)
			f.Width, f.Height, f.ThumbnailKey = 0, 0, ""
		}
	}()
	o, err := s.storage.Open(ctx, f.StorageKey)
	if err != nil {
		s.log.Warn("files: thumbnail: open", "file", f.ID, "err", err)
		return
	}
	defer o.Close()
	cfg, _, err := image.DecodeConfig(bufio.NewReader(o))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return
	}
	f.Width, f.Height = cfg.Width, cfg.Height
	if f.Size > MaxThumbnailBytes || int64(cfg.Width)*int64(cfg.Height) > MaxThumbnailPixels {
		return
	}
	select {
	case s.thumbs <- struct{}{}:
		defer func() { <-s.thumbs }()
	case <-ctx.Done():
		return
	}
	if _, err := o.Seek(0, 0); err != nil {
		return
	}
	img, _, err := image.Decode(bufio.NewReader(o))
	if err != nil {
		return
	}
	data, ext := encodeThumbnail(scale(img, ThumbnailSize))
	key := f.StorageKey + ".thumb." + ext
	if _, err := s.storage.Put(ctx, key, bytes.NewReader(data), int64(len(data)), ThumbnailType(key)); err != nil {
		s.log.Warn("files: thumbnail: store", "file", f.ID, "err", err)
		return
	}
	f.ThumbnailKey = key
}

// scale returns img scaled down to fit a box of side pixels (never up).
func scale(img image.Image, side int) image.Image {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= side && h <= side {
		return img
	}
	if w >= h {
		h, w = max(1, h*side/w), side
	} else {
		w, h = max(1, w*side/h), side
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	xdraw.CatmullRom.Scale(dst, dst.Bounds(), img, b, draw.Over, nil)
	return dst
}

// encodeThumbnail encodes as PNG what has transparency, JPEG the rest.
func encodeThumbnail(img image.Image) ([]byte, string) {
	var buf bytes.Buffer
	if o, ok := img.(interface{ Opaque() bool }); ok && o.Opaque() {
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 82}); err == nil {
			return buf.Bytes(), "jpg"
		}
		buf.Reset()
	}
	png.Encode(&buf, img)
	return buf.Bytes(), "png"
}

// ThumbnailType is the content type of a thumbnail key.
func ThumbnailType(key string) string {
	if len(key) > 4 && key[len(key)-4:] == ".png" {
		return "image/png"
	}
	return "image/jpeg"
}
