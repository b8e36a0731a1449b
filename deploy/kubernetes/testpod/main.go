// Command testpod is the one program in the images the node test runs (no registry, no base
// image: a static binary in an otherwise empty root). Its modes:
//
//	testpod pause               the pod sandbox's process: waits for SIGTERM/SIGINT, reaps children
//	testpod serve [-port N]     an HTTP server: /healthz (200, or 500 once /fail was posted),
//	                            /info (JSON: hostname, pid, uid, the cgroup's memory limit and CPU quota)
//	testpod probe URL           exits 0 when URL answers 2xx within a second, 1 otherwise (an exec probe)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testpod pause | serve [-port N] | probe URL")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "pause":
		pause()
	case "serve":
		serve(os.Args[2:])
	case "probe":
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: testpod probe URL")
			os.Exit(2)
		}
		os.Exit(probe(os.Args[2]))
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}

func pause() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			// PID 1 of the pod: collect whatever was orphaned into it.
			for {
				var status syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}

// readFirst returns the trimmed content of the first of paths that can be read, or "".
func readFirst(paths ...string) string {
	for _, path := range paths {
		if data, err := os.ReadFile(path); err == nil {
			return strings.TrimSpace(string(data))
		}
	}
	return ""
}

func serve(args []string) {
	flags := flag.NewFlagSet("serve", flag.ExitOnError)
	port := flags.Int("port", 8080, "port to listen on (every address)")
	_ = flags.Parse(args)
	var unhealthy atomic.Bool
	hostname, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if unhealthy.Load() {
			http.Error(w, "failing on request", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		unhealthy.Store(true)
		fmt.Printf("asked to fail its health check from %s\n", r.RemoteAddr)
		fmt.Fprintln(w, "failing from now on")
	})
	mux.HandleFunc("/info", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"hostname": hostname,
			"pid":      os.Getpid(),
			"uid":      os.Getuid(),
			// cgroup v1 paths first, then v2 (the container sees its own cgroup at the root).
			"memory_limit": readFirst("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max"),
			"cpu_quota":    readFirst("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu.max"),
			"cpu_period":   readFirst("/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
			"env_pod_name": os.Getenv("POD_NAME"),
		})
	})
	server := &http.Server{Addr: fmt.Sprintf(":%d", *port), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-stop
		fmt.Printf("%s: shutting down\n", sig)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(ctx)
	}()
	fmt.Printf("testpod serving on :%d as %s (pid %d)\n", *port, hostname, os.Getpid())
	if err := server.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func probe(url string) int {
	client := http.Client{Timeout: time.Second}
	response, err := client.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer response.Body.Close()
	if response.StatusCode < 200 || response.StatusCode > 299 {
		fmt.Fprintf(os.Stderr, "%s: %s\n", url, response.Status)
		return 1
	}
	return 0
}
