// Prototype: N keep-alive requests over C connections, io_uring vs epoll.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;

const REQ: &[u8] = b"GET /small.html HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: p\r\nAccept: */*\r\n\r\n";

fn resp_done(buf: &[u8]) -> bool {
    // Complete when the head is in and Content-Length bytes follow.
    if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = std::str::from_utf8(&buf[..p]).unwrap();
        let cl: usize = head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())).unwrap_or(0);
        return buf.len() >= p + 4 + cl;
    }
    false
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let mode = a[1].clone();
    let addr = a[2].clone();
    let conns: usize = a[3].parse().unwrap();
    let total: u64 = a[4].parse().unwrap();
    let socks: Vec<TcpStream> = (0..conns).map(|_| { let s = TcpStream::connect(&addr).unwrap(); s.set_nodelay(true).unwrap(); s }).collect();
    let mut bufs: Vec<Vec<u8>> = vec![Vec::with_capacity(4096); conns];
    let mut rbuf = vec![0u8; 65536];
    let mut sent = 0u64;
    let mut done = 0u64;
    let t0 = std::time::Instant::now();
    if mode == "uring" {
        use io_uring::{opcode, types, IoUring};
        let mut ring = IoUring::new(256).unwrap();
        let mut rb: Vec<Vec<u8>> = vec![vec![0u8; 8192]; conns];
        // user_data: i*2 = send, i*2+1 = recv
        for i in 0..conns {
            let fd = types::Fd(socks[i].as_raw_fd());
            let s = opcode::Send::new(fd, REQ.as_ptr(), REQ.len() as u32).build().user_data((i * 2) as u64);
            let r = opcode::Recv::new(fd, rb[i].as_mut_ptr(), rb[i].len() as u32).build().user_data((i * 2 + 1) as u64);
            unsafe { ring.submission().push(&s).unwrap(); ring.submission().push(&r).unwrap(); }
            sent += 1;
        }
        while done < total {
            ring.submit_and_wait(1).unwrap();
            let cqes: Vec<(u64, i32)> = ring.completion().map(|c| (c.user_data(), c.result())).collect();
            for (ud, res) in cqes {
                let i = (ud / 2) as usize;
                if ud % 2 == 0 { assert!(res > 0); continue; }
                assert!(res > 0, "recv {res}");
                let n = res as usize;
                bufs[i].extend_from_slice(&rb[i][..n]);
                let fd = types::Fd(socks[i].as_raw_fd());
                if resp_done(&bufs[i]) {
                    bufs[i].clear();
                    done += 1;
                    if sent < total {
                        sent += 1;
                        let s = opcode::Send::new(fd, REQ.as_ptr(), REQ.len() as u32).build().user_data((i * 2) as u64);
                        unsafe { ring.submission().push(&s).unwrap(); }
                    } else { continue; }
                }
                let r = opcode::Recv::new(fd, rb[i].as_mut_ptr(), rb[i].len() as u32).build().user_data((i * 2 + 1) as u64);
                unsafe { ring.submission().push(&r).unwrap(); }
            }
        }
    } else {
        let ep = unsafe { libc::epoll_create1(0) };
        let mut socks = socks;
        for (i, s) in socks.iter_mut().enumerate() {
            s.set_nonblocking(true).unwrap();
            let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLET) as u32, u64: i as u64 };
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) };
            s.write_all(REQ).unwrap();
            sent += 1;
        }
        let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        while done < total {
            let n = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), 256, -1) };
            for e in &evs[..n as usize] {
                let i = e.u64 as usize;
                loop {
                    match socks[i].read(&mut rbuf) {
                        Ok(0) => panic!("eof"),
                        Ok(n) => {
                            bufs[i].extend_from_slice(&rbuf[..n]);
                            if resp_done(&bufs[i]) {
                                bufs[i].clear();
                                done += 1;
                                if sent < total { sent += 1; socks[i].write_all(REQ).unwrap(); }
                                break;
                            }
                            if n < rbuf.len() { break; }
                        }
                        Err(_) => break,
                    }
                }
            }
        }
    }
    let el = t0.elapsed().as_secs_f64();
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let u = ru.ru_utime.tv_sec as f64 + ru.ru_utime.tv_usec as f64 / 1e6;
    let s = ru.ru_stime.tv_sec as f64 + ru.ru_stime.tv_usec as f64 / 1e6;
    println!("{mode}: {done} in {el:.2}s = {:.0}/s; user {u:.2} sys {s:.2}; {:.0} req per CPU-s", done as f64 / el, done as f64 / (u + s));
}
