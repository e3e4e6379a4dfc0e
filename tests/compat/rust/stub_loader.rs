// A Rust program that reaches libnixl_capi.so the way nixl-sys's `stub-api` mode does: dlopen of
// the bare name with RTLD_NOW | RTLD_LOCAL from the loader path, dlsym of each function on first
// use, arguments passed through unchanged, with the types bindgen makes of nixl_capi.h
// (#[repr(C)] structs, 4-byte enums, `bool`). Then one transfer end to end: two agents with
// UCX, registration, metadata, a WRITE with a notification, the notification map, release.
// Built with plain rustc (no crates): rustc --edition 2021 stub_loader.rs
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr::null_mut;
use std::time::{Duration, Instant};

#[link(name = "dl")]
extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *const c_char;
    fn free(p: *mut c_void);
}
const RTLD_NOW: c_int = 2;
const RTLD_LOCAL: c_int = 0;

type Status = c_int;
type H = *mut c_void;

#[repr(C)]
struct AgentConfig {
    enable_prog_thread: bool,
    enable_listen_thread: bool,
    listen_port: c_int,
    thread_sync: c_int,
    num_workers: u32,
    pthr_delay_us: u64,
    lthr_delay_us: u64,
    capture_telemetry: bool,
}

struct Lib(*mut c_void);
impl Lib {
    fn open() -> Lib {
        let name = CString::new("libnixl_capi.so").unwrap();
        let h = unsafe { dlopen(name.as_ptr(), RTLD_NOW | RTLD_LOCAL) };
        if h.is_null() {
            let e = unsafe { CStr::from_ptr(dlerror()) };
            eprintln!("failed to load libnixl_capi.so ({:?}); set LD_LIBRARY_PATH", e);
            std::process::abort();
        }
        Lib(h)
    }
    fn sym<T: Copy>(&self, name: &str) -> T {
        let n = CString::new(name).unwrap();
        let p = unsafe { dlsym(self.0, n.as_ptr()) };
        if p.is_null() {
            eprintln!("symbol {} not found", name);
            std::process::abort();
        }
        assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
        unsafe { std::mem::transmute_copy(&p) }
    }
}

macro_rules! check {
    ($e:expr) => {
        if !$e {
            eprintln!("{}:{}: check failed: {}", file!(), line!(), stringify!($e));
            std::process::exit(1);
        }
    };
}

fn main() {
    assert_eq!(std::mem::size_of::<AgentConfig>(), 40);
    let lib = Lib::open();
    let is_stub: extern "C" fn() -> bool = lib.sym("nixl_capi_is_stub");
    check!(!is_stub());
    let create_cfg: extern "C" fn(*const c_char, *const AgentConfig, *mut H) -> Status =
        lib.sym("nixl_capi_create_configured_agent");
    let destroy_agent: extern "C" fn(H) -> Status = lib.sym("nixl_capi_destroy_agent");
    let create_params: extern "C" fn(*mut H) -> Status = lib.sym("nixl_capi_create_params");
    let destroy_params: extern "C" fn(H) -> Status = lib.sym("nixl_capi_destroy_params");
    let create_backend: extern "C" fn(H, *const c_char, H, *mut H) -> Status =
        lib.sym("nixl_capi_create_backend");
    let destroy_backend: extern "C" fn(H) -> Status = lib.sym("nixl_capi_destroy_backend");
    let create_reg: extern "C" fn(c_int, *mut H) -> Status = lib.sym("nixl_capi_create_reg_dlist");
    let reg_add: extern "C" fn(H, usize, usize, u64, *const c_void, usize) -> Status =
        lib.sym("nixl_capi_reg_dlist_add_desc");
    let reg_clear: extern "C" fn(H) -> Status = lib.sym("nixl_capi_reg_dlist_clear");
    let destroy_reg: extern "C" fn(H) -> Status = lib.sym("nixl_capi_destroy_reg_dlist");
    let register: extern "C" fn(H, H, H) -> Status = lib.sym("nixl_capi_register_mem");
    let deregister: extern "C" fn(H, H, H) -> Status = lib.sym("nixl_capi_deregister_mem");
    let get_md: extern "C" fn(H, *mut *mut c_void, *mut usize) -> Status =
        lib.sym("nixl_capi_get_local_md");
    let load_md: extern "C" fn(H, *const c_void, usize, *mut *mut c_char) -> Status =
        lib.sym("nixl_capi_load_remote_md");
    let invalidate: extern "C" fn(H, *const c_char) -> Status =
        lib.sym("nixl_capi_invalidate_remote_md");
    let create_xfer: extern "C" fn(c_int, *mut H) -> Status =
        lib.sym("nixl_capi_create_xfer_dlist");
    let xfer_add: extern "C" fn(H, usize, usize, u64) -> Status =
        lib.sym("nixl_capi_xfer_dlist_add_desc");
    let destroy_xfer: extern "C" fn(H) -> Status = lib.sym("nixl_capi_destroy_xfer_dlist");
    let create_opt: extern "C" fn(*mut H) -> Status = lib.sym("nixl_capi_create_opt_args");
    let destroy_opt: extern "C" fn(H) -> Status = lib.sym("nixl_capi_destroy_opt_args");
    let set_msg: extern "C" fn(H, *const c_void, usize) -> Status =
        lib.sym("nixl_capi_opt_args_set_notif_msg");
    let set_has: extern "C" fn(H, bool) -> Status = lib.sym("nixl_capi_opt_args_set_has_notif");
    let create_req: extern "C" fn(H, c_int, H, H, *const c_char, *mut H, H) -> Status =
        lib.sym("nixl_capi_create_xfer_req");
    let post: extern "C" fn(H, H, H) -> Status = lib.sym("nixl_capi_post_xfer_req");
    let status: extern "C" fn(H, H) -> Status = lib.sym("nixl_capi_get_xfer_status");
    let release: extern "C" fn(H, H) -> Status = lib.sym("nixl_capi_release_xfer_req");
    let destroy_req: extern "C" fn(H) -> Status = lib.sym("nixl_capi_destroy_xfer_req");
    let create_map: extern "C" fn(*mut H) -> Status = lib.sym("nixl_capi_create_notif_map");
    let destroy_map: extern "C" fn(H) -> Status = lib.sym("nixl_capi_destroy_notif_map");
    let get_notifs: extern "C" fn(H, H, H) -> Status = lib.sym("nixl_capi_get_notifs");
    let map_size: extern "C" fn(H, *mut usize) -> Status = lib.sym("nixl_capi_notif_map_size");
    let agent_at: extern "C" fn(H, usize, *mut *const c_char) -> Status =
        lib.sym("nixl_capi_notif_map_get_agent_at");
    let get_notif: extern "C" fn(H, *const c_char, usize, *mut *const c_void, *mut usize) -> Status =
        lib.sym("nixl_capi_notif_map_get_notif");

    let cfg = AgentConfig {
        enable_prog_thread: true,
        enable_listen_thread: false,
        listen_port: 8888,
        thread_sync: 0,
        num_workers: 1,
        pthr_delay_us: 0,
        lthr_delay_us: 100000,
        capture_telemetry: false,
    };
    let (na, nb) = (CString::new("rust-a").unwrap(), CString::new("rust-b").unwrap());
    let (mut a, mut b, mut p, mut ba, mut bb): (H, H, H, H, H) =
        (null_mut(), null_mut(), null_mut(), null_mut(), null_mut());
    check!(create_cfg(na.as_ptr(), &cfg, &mut a) == 0);
    check!(create_cfg(nb.as_ptr(), &cfg, &mut b) == 0);
    check!(create_cfg(na.as_ptr(), std::ptr::null(), &mut a) == -1);
    check!(create_params(&mut p) == 0);
    let ucx = CString::new("UCX").unwrap();
    if create_backend(a, ucx.as_ptr(), p, &mut ba) != 0 {
        println!("SKIPPED: no UCX backend");
        std::process::exit(77);
    }
    check!(create_backend(b, ucx.as_ptr(), p, &mut bb) == 0);

    let src = vec![7u8; 8192];
    let dst = vec![0u8; 8192];
    let (mut rs, mut rd): (H, H) = (null_mut(), null_mut());
    check!(create_reg(0, &mut rs) == 0 && create_reg(0, &mut rd) == 0);
    // nixl-sys mirrors lists in a Vec and syncs them with clear + add_desc before use.
    check!(reg_clear(rs) == 0);
    check!(reg_add(rs, src.as_ptr() as usize, src.len(), 0, std::ptr::null(), 0) == 0);
    check!(reg_add(rd, dst.as_ptr() as usize, dst.len(), 0, std::ptr::null(), 0) == 0);
    check!(register(a, rs, null_mut()) == 0);
    check!(register(b, rd, null_mut()) == 0);

    let (mut md, mut len, mut name): (*mut c_void, usize, *mut c_char) = (null_mut(), 0, null_mut());
    check!(get_md(b, &mut md, &mut len) == 0 && !md.is_null());
    check!(load_md(a, md, len, &mut name) == 0);
    check!(unsafe { CStr::from_ptr(name) }.to_str() == Ok("rust-b"));
    unsafe {
        free(md);
        free(name as *mut c_void);
    }

    let (mut xs, mut xd, mut opt, mut req): (H, H, H, H) =
        (null_mut(), null_mut(), null_mut(), null_mut());
    check!(create_xfer(0, &mut xs) == 0 && create_xfer(0, &mut xd) == 0);
    check!(xfer_add(xs, src.as_ptr() as usize, src.len(), 0) == 0);
    check!(xfer_add(xd, dst.as_ptr() as usize, dst.len(), 0) == 0);
    check!(create_opt(&mut opt) == 0);
    let msg = b"from rust";
    check!(set_msg(opt, msg.as_ptr() as *const c_void, msg.len()) == 0);
    check!(set_has(opt, true) == 0);
    check!(create_req(a, 1, xs, xd, nb.as_ptr(), &mut req, opt) == 0);
    let mut s = post(a, req, null_mut());
    let end = Instant::now() + Duration::from_secs(20);
    while s == 1 && Instant::now() < end {
        s = status(a, req);
    }
    check!(s == 0);
    check!(dst == src);

    let mut map: H = null_mut();
    check!(create_map(&mut map) == 0);
    let mut n = 0usize;
    let end = Instant::now() + Duration::from_secs(10);
    while n == 0 && Instant::now() < end {
        check!(get_notifs(b, map, null_mut()) == 0);
        check!(map_size(map, &mut n) == 0);
    }
    check!(n == 1);
    let mut who: *const c_char = std::ptr::null();
    check!(agent_at(map, 0, &mut who) == 0);
    check!(unsafe { CStr::from_ptr(who) }.to_str() == Ok("rust-a"));
    let (mut data, mut dlen): (*const c_void, usize) = (std::ptr::null(), 0);
    check!(get_notif(map, who, 0, &mut data, &mut dlen) == 0);
    check!(unsafe { std::slice::from_raw_parts(data as *const u8, dlen) } == msg);

    // Drops in nixl-sys's order: request (release, destroy), lists, registrations, remotes,
    // backends, agents.
    check!(destroy_req(req) == -3);
    check!(release(a, req) == 0 && destroy_req(req) == 0);
    check!(destroy_map(map) == 0 && destroy_opt(opt) == 0);
    check!(destroy_xfer(xs) == 0 && destroy_xfer(xd) == 0);
    check!(deregister(a, rs, null_mut()) == 0 && deregister(b, rd, null_mut()) == 0);
    check!(destroy_reg(rs) == 0 && destroy_reg(rd) == 0);
    check!(invalidate(a, nb.as_ptr()) == 0);
    check!(destroy_backend(ba) == 0 && destroy_backend(bb) == 0 && destroy_params(p) == 0);
    check!(destroy_agent(a) == 0 && destroy_agent(b) == 0);
    println!("Rust through the stub-api loading path: OK");
}
