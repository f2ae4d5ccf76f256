// `?` and `return` in traced bodies keep their meaning.
use std::num::ParseIntError;

use minitrace::prelude::*;

#[trace]
fn parse(text: &str) -> Result<u32, ParseIntError> {
    if text.is_empty() {
        return Ok(0);
    }
    let value = text.parse::<u32>()?;
    Ok(value)
}

#[trace]
async fn parse_async(text: &str) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
    if text.is_empty() {
        return Ok(0);
    }
    let value = text.parse::<u32>()?;
    Ok(value)
}

#[trace]
async fn parse_option(text: Option<&str>) -> Option<usize> {
    Some(text?.len())
}

fn main() {
    assert_eq!(parse("1"), Ok(1));
    assert_eq!(parse(""), Ok(0));
    assert!(parse("x").is_err());
    assert_eq!(futures::executor::block_on(parse_async("2")).unwrap(), 2);
    assert!(futures::executor::block_on(parse_async("x")).is_err());
    assert_eq!(futures::executor::block_on(parse_option(None)), None);
}
