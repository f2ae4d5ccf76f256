// Visibility, `unsafe`, `extern`, other attributes, doc comments and inner
// attributes are kept.
#![deny(unused_mut, unused_variables)]

use minitrace::prelude::*;

mod inner {
    use minitrace::prelude::*;

    /// Documented.
    #[trace]
    #[inline]
    pub(crate) fn visible() -> u32 {
        1
    }

    #[trace]
    pub async fn visible_async() -> u32 {
        2
    }
}

#[trace]
unsafe fn read(pointer: *const u32) -> u32 {
    *pointer
}

#[trace]
async unsafe fn read_async(pointer: *const u32) -> u32 {
    *pointer
}

#[trace]
extern "C" fn callback(value: u32) -> u32 {
    value
}

#[trace]
#[must_use]
fn with_inner_attribute() -> u32 {
    #![allow(clippy::let_and_return)]
    let value = 3;
    value
}

#[trace]
fn diverges() -> ! {
    panic!("never called")
}

fn main() {
    let value = 4;
    assert_eq!(inner::visible(), 1);
    assert_eq!(futures::executor::block_on(inner::visible_async()), 2);
    // SAFETY: the pointer is to a live local.
    assert_eq!(unsafe { read(&value) }, 4);
    // SAFETY: the pointer is to a live local.
    assert_eq!(futures::executor::block_on(unsafe { read_async(&value) }), 4);
    assert_eq!(callback(5), 5);
    assert_eq!(with_inner_attribute(), 3);
    let _ = diverges as fn() -> !;
}
