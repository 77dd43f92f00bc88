package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"parley/files"
)

// The flags of file storage (docs/files.md): a directory by default, an
// S3-compatible bucket when --s3-bucket is set.

// fileOptions are the settings of those flags.
type fileOptions struct {
	FilesDir       string        // --files-dir; default <data>/files
	S3Endpoint     string        // --s3-endpoint
	S3Bucket       string        // --s3-bucket; set: S3 instead of the directory
	S3Region       string        // --s3-region
	S3AccessKey    string        // --s3-access-key
	S3SecretKey    string        // --s3-secret-key
	S3Prefix       string        // --s3-prefix
	S3PathStyle    bool          // --s3-path-style
	S3CreateBucket bool          // --s3-create-bucket
	FileURLTTL     time.Duration // --file-url-ttl
}

func (o *fileOptions) registerFiles(fs *pflag.FlagSet) {
	fs.StringVar(&o.FilesDir, "files-dir", "", "directory of uploaded files when no --s3-bucket is set (default: <data>/files)")
	fs.StringVar(&o.S3Endpoint, "s3-endpoint", "https://s3.amazonaws.com", "URL of the S3-compatible store that holds uploaded files (http:// for no TLS)")
	fs.StringVar(&o.S3Bucket, "s3-bucket", "", "bucket for uploaded files; when set, files go to S3 instead of --files-dir")
	fs.StringVar(&o.S3Region, "s3-region", "us-east-1", "region of the S3 bucket")
	fs.StringVar(&o.S3AccessKey, "s3-access-key", "", "S3 access key id")
	fs.StringVar(&o.S3SecretKey, "s3-secret-key", "", "S3 secret access key (prefer the environment variable to the flag)")
	fs.StringVar(&o.S3Prefix, "s3-prefix", "", `key prefix of Parley's objects in the bucket ("parley/"), so that it can share a bucket`)
	fs.BoolVar(&o.S3PathStyle, "s3-path-style", true, "path-style S3 requests (host/bucket/key), which MinIO, Ceph and versitygw need; false lets the client pick")
	fs.BoolVar(&o.S3CreateBucket, "s3-create-bucket", false, "create the bucket at start-up when it does not exist")
	fs.DurationVar(&o.FileURLTTL, "file-url-ttl", 15*time.Minute, "how long a signed file download URL works")
}

func (o *fileOptions) validateFiles() error {
	if o.FileURLTTL < 10*time.Second || o.FileURLTTL > 7*24*time.Hour {
		return errors.New("--file-url-ttl must be between 10s and 168h")
	}
	if o.S3Bucket == "" {
		return nil
	}
	u, err := url.Parse(o.S3Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("--s3-endpoint must be an http(s):// URL, not %q", o.S3Endpoint)
	}
	if o.S3AccessKey == "" || o.S3SecretKey == "" {
		return errors.New("--s3-bucket needs --s3-access-key and --s3-secret-key (or PARLEY_S3_ACCESS_KEY and PARLEY_S3_SECRET_KEY)")
	}
	return nil
}

// openFileStorage opens the storage the options name.
func (o *serveOptions) openFileStorage(ctx context.Context) (files.Storage, string, error) {
	if o.S3Bucket != "" {
		s, err := files.NewS3(ctx, files.S3Config{Endpoint: o.S3Endpoint, Bucket: o.S3Bucket, Region: o.S3Region,
			AccessKey: o.S3AccessKey, SecretKey: o.S3SecretKey, Prefix: o.S3Prefix, PathStyle: o.S3PathStyle,
			CreateBucket: o.S3CreateBucket})
		if err != nil {
			return nil, "", err
		}
		return s, "s3://" + o.S3Bucket + "/" + o.S3Prefix, nil
	}
	dir := o.FilesDir
	if dir == "" {
		dir = filepath.Join(o.DataDir, "files")
	}
	s, err := files.NewLocal(dir)
	return s, dir, err
}
