#ifndef _NIXL_PARAMS_H
#define _NIXL_PARAMS_H
/// NIXL's agent configuration (nixl_params.h of NIXL 1.4): fields, defaults and constructor.

#include <chrono>
#include <cstdint>

#include "nixl_types.h"

struct nixlAgentConfig {
  static constexpr bool kDefaultUseProgThread = false;
  static constexpr bool kDefaultUseListenThread = false;
  static constexpr uint16_t kDefaultListenPort = default_comm_port;
  static constexpr nixl_thread_sync_t kDefaultSyncMode =
      nixl_thread_sync_t::NIXL_THREAD_SYNC_DEFAULT;
  static constexpr bool kDefaultCaptureTelemetry = false;
  static constexpr uint64_t kDefaultPthrDelayUs = 0;
  static constexpr uint64_t kDefaultLthrDelayUs = 100000;
  static constexpr std::chrono::microseconds kDefaultEtcdWatchTimeout =
      std::chrono::microseconds(5000000);
  static constexpr std::chrono::microseconds kDefaultXferStallTimeout{0};

  /// Backends may run a progress thread (UCX).
  bool useProgThread = kDefaultUseProgThread;
  /// Run the metadata listener (peers send, fetch and invalidate through it).
  bool useListenThread = kDefaultUseListenThread;
  /// Listener port; 0 lets the system choose.
  uint16_t listenPort = kDefaultListenPort;
  nixl_thread_sync_t syncMode = kDefaultSyncMode;
  bool captureTelemetry = kDefaultCaptureTelemetry;
  /// Progress thread wake-up period (µs).
  uint64_t pthrDelay = kDefaultPthrDelayUs;
  /// Metadata worker delay (µs); accepted, the listener does not poll.
  uint64_t lthrDelay = kDefaultLthrDelayUs;
  /// How long an etcd fetch waits for a key that is not there yet.
  std::chrono::microseconds etcdWatchTimeout = kDefaultEtcdWatchTimeout;
  /// A request still in progress this long after its post is canceled and getXferStatus
  /// answers NIXL_ERR_XFER_STALLED; <= 0: off.
  std::chrono::microseconds xferStallTimeout = kDefaultXferStallTimeout;

  nixlAgentConfig() = default;
  /// `num_workers` is accepted and ignored, as in NIXL (UCX takes the backend parameter).
  explicit nixlAgentConfig(
      const bool use_prog_thread, const bool use_listen_thread = kDefaultUseListenThread,
      uint16_t port = kDefaultListenPort, nixl_thread_sync_t sync_mode = kDefaultSyncMode,
      unsigned int num_workers = 1, uint64_t pthr_delay_us = kDefaultPthrDelayUs,
      uint64_t lthr_delay_us = kDefaultLthrDelayUs,
      bool capture_telemetry = kDefaultCaptureTelemetry,
      std::chrono::microseconds etcd_watch_timeout = kDefaultEtcdWatchTimeout,
      std::chrono::microseconds xfer_stall_timeout = kDefaultXferStallTimeout) noexcept
      : useProgThread(use_prog_thread),
        useListenThread(use_listen_thread),
        listenPort(port),
        syncMode(sync_mode),
        captureTelemetry(capture_telemetry),
        pthrDelay(pthr_delay_us),
        lthrDelay(lthr_delay_us),
        etcdWatchTimeout(etcd_watch_timeout),
        xferStallTimeout(xfer_stall_timeout) {
    (void)num_workers;
  }
};

#endif
