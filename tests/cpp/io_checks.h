// The self-test's checks of npy.cuh and tensor.cuh's fills: .npy files read and written (hand-made
// ones too, for what write_npy never produces) and tensors filled from specs and files.
// Included by runtime_selftest.cu inside its check framework.
#pragma once

// ------------------------------------------------------------------ npy

// A .npy file written by hand, to test what write_npy never produces.
std::string handmade_npy(const std::string& dict, const void* data, size_t bytes, int major = 1) {
  std::string file("\x93NUMPY", 6);
  file += char(major);
  file += char(0);
  const size_t length = dict.size();
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) file += char((length >> (8 * i)) & 0xFF);
  file += dict;
  file.append(static_cast<const char*>(data), bytes);
  return file;
}

void write_text(const std::string& path, const std::string& content) {
  std::string error;
  if (!write_file_bytes(path, content.data(), content.size(), &error)) std::printf("  %s\n", error.c_str());
}

void test_npy(ScratchDir& dir) {
  std::string error;
  // Round trip of every dtype, rank 1 to 4.
  const DType all[] = {DType::f64, DType::f32, DType::tf32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2,
                       DType::i8, DType::u8, DType::i32, DType::u32, DType::i64, DType::boolean};
  const std::vector<std::vector<int64_t>> shapes = {{7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 2}};
  for (DType dtype : all) {
    for (const std::vector<int64_t>& shape : shapes) {
      const int rank = int(shape.size());
      const int64_t numel = product(rank, shape.data());
      std::vector<unsigned char> data(size_t(numel) * dtype_bytes(dtype));
      for (int64_t i = 0; i < numel; ++i) encode(dtype, data.data(), i, double(i % 5) - 2.0);
      const std::string path = dir.file(std::string("rt_") + dtype_name(dtype) + std::to_string(rank) + ".npy");
      std::vector<unsigned char> loaded;
      const bool ok = write_npy(path, dtype, rank, shape.data(), data.data(), &error) &&
                      load_tensor_file(path, "T", dtype, rank, shape.data(), &loaded, &error);
      record(ok && loaded == data, __FILE__, __LINE__,
             std::string("npy round trip of ") + dtype_name(dtype) + " " + format_shape(rank, shape.data()) + " " + error);
    }
  }
  // The header numpy expects: version 1.0, data 64-byte aligned, the descr of the dtype.
  std::vector<unsigned char> file;
  const int64_t shape23[2] = {2, 3};
  {
    // Unbounded inputs are refused before any read: a device never ends, a fifo blocks.
    std::vector<unsigned char> logical;
    const int64_t shape2[2] = {4, 4};
    std::string why;
    CHECK(!load_tensor_file("/dev/zero.npy", "Z", DType::f32, 2, shape2, &logical, &why));
    CHECK(!read_file_bytes("/dev/zero", &logical, &why, 1 << 20));
    CHECK_CONTAINS(why, "is not a regular file (a character device)");
    const std::string fifo = dir.path + "/fifo.npy";
    CHECK(mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(!load_tensor_file(fifo, "Z", DType::f32, 2, shape2, &logical, &why));
    CHECK_CONTAINS(why, "is not a regular file (a fifo)");
    // Larger than the tensor: refused by its size, unread.
    const std::string big = dir.path + "/big.bin";
    std::vector<unsigned char> bytes(65, 0);
    CHECK(write_file_bytes(big, bytes.data(), bytes.size(), &why));
    CHECK(!load_tensor_file(big, "Z", DType::f32, 2, shape2, &logical, &why));
    CHECK_CONTAINS(why, "has 65 bytes; tensor Z (f32 [4, 4]) needs exactly 64");
    const std::string big_npy = dir.path + "/big.npy";
    std::vector<unsigned char> huge((size_t(1) << 20) + 200, 0);
    CHECK(write_file_bytes(big_npy, huge.data(), huge.size(), &why));
    CHECK(!load_tensor_file(big_npy, "Z", DType::f32, 2, shape2, &logical, &why));
    CHECK_CONTAINS(why, "this tensor's data can take; it is not read");
  }
  read_file_bytes(dir.path + "/rt_bf162.npy", &file, &error);
  const size_t header_length = file[8] | (size_t(file[9]) << 8);
  CHECK(file[6] == 1 && file[7] == 0 && (10 + header_length) % 64 == 0 && file[10 + header_length - 1] == '\n');
  CHECK_CONTAINS(std::string(file.begin() + 10, file.begin() + 10 + long(header_length)),
                 "{'descr': '<u2', 'fortran_order': False, 'shape': (3, 5), }");
  read_file_bytes(dir.path + "/rt_i81.npy", &file, &error);
  CHECK_CONTAINS(std::string(file.begin(), file.end()), "'descr': '|i1', 'fortran_order': False, 'shape': (7,), }");

  // Fortran order: column-major data, loaded into logical row-major order.
  const float column_major[6] = {1, 4, 2, 5, 3, 6};  // [[1, 2, 3], [4, 5, 6]]
  const std::string fortran = dir.file("fortran.npy");
  write_text(fortran, handmade_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", column_major, 24));
  std::vector<unsigned char> loaded;
  CHECK(load_tensor_file(fortran, "A", DType::f32, 2, shape23, &loaded, &error));
  std::string order;
  for (int i = 0; i < 6; ++i) order += format_value(decode(DType::f32, loaded.data(), i));
  CHECK_EQ(order, std::string("123456"));
  // Rank 3, Fortran order: element (i, j, k) sits at i + 2 j + 4 k.
  int16_t f3[16];
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < 2; ++i) f3[i + 2 * j + 4 * k] = int16_t(100 * i + 10 * j + k);
  const int64_t shape224[3] = {2, 2, 4};
  const std::string fortran3 = dir.file("fortran3.npy");
  write_text(fortran3, handmade_npy("{'descr': '<i2', 'fortran_order': True, 'shape': (2, 2, 4)}", f3, sizeof f3, 2));
  CHECK(load_tensor_file(fortran3, "B", DType::bf16, 3, shape224, &loaded, &error));  // bf16 accepts raw <i2
  bool fortran_ok = loaded.size() == 32;
  for (int64_t i = 0; fortran_ok && i < 16; ++i) {
    const int64_t want = 100 * (i / 8) + 10 * ((i / 4) % 2) + i % 4;
    fortran_ok = int16_t(load_bits(DType::bf16, loaded.data(), i)) == want;
  }
  CHECK(fortran_ok);

  // Raw-bit carriers for bf16 and fp8, and numpy's other spellings of one-byte types.
  const unsigned char two_bytes[12] = {0x80, 0x3F};
  const std::string void2 = dir.file("void2.npy");
  write_text(void2, handmade_npy("{'descr': '|V2', 'fortran_order': False, 'shape': (2, 3), }", two_bytes, 12));
  CHECK(load_tensor_file(void2, "A", DType::bf16, 2, shape23, &loaded, &error) && decode(DType::bf16, loaded.data(), 0) == 1.0);
  const unsigned char six_bytes[6] = {0x38, 0, 0, 0, 0, 0};
  const std::string int8 = dir.file("int8.npy");
  write_text(int8, handmade_npy("{\"descr\": \"<i1\", \"fortran_order\": False, \"shape\": (2, 3)}", six_bytes, 6));
  CHECK(load_tensor_file(int8, "A", DType::e4m3, 2, shape23, &loaded, &error) && decode(DType::e4m3, loaded.data(), 0) == 1.0);
  CHECK(load_tensor_file(int8, "A", DType::i8, 2, shape23, &loaded, &error));

  // Mismatches name the file, what it holds, and what the tensor needs.
  const std::string f32_file = dir.path + "/rt_f322.npy";  // f32 [3, 5]
  const int64_t shape35[2] = {3, 5}, shape53[2] = {5, 3};
  CHECK(!load_tensor_file(f32_file, "A", DType::bf16, 2, shape35, &loaded, &error));
  CHECK_CONTAINS(error, f32_file + " holds <f4 [3, 5] but tensor A (bf16 [3, 5]) needs <u2 (also accepted: |V2, <V2, <i2) [3, 5]");
  CHECK(!load_tensor_file(f32_file, "A", DType::f32, 2, shape53, &loaded, &error));
  CHECK_CONTAINS(error, "holds <f4 [3, 5] but tensor A (f32 [5, 3]) needs <f4 [5, 3]");
  CHECK(!load_tensor_file(f32_file, "A", DType::f32, 1, shape35 + 1, &loaded, &error));
  CHECK_CONTAINS(error, "needs <f4 [5]");
  const std::string big_endian = dir.file("big.npy");
  write_text(big_endian, handmade_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", column_major, 24));
  CHECK(!load_tensor_file(big_endian, "A", DType::f32, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, "holds >f4 [2, 3]");
  const std::string truncated = dir.file("truncated.npy");
  write_text(truncated, handmade_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", column_major, 20));
  CHECK(!load_tensor_file(truncated, "A", DType::f32, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, "is truncated: 24 bytes of elements expected, 20 present");
  const std::string not_npy = dir.file("not.npy");
  write_text(not_npy, "hello, world");
  CHECK(!load_tensor_file(not_npy, "A", DType::f32, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, "is not a .npy file");
  const std::string bad_header = dir.file("badheader.npy");
  write_text(bad_header, handmade_npy("{'descr': '<f4', 'shape': (2, 3), }", column_major, 24));
  CHECK(!load_tensor_file(bad_header, "A", DType::f32, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, "cannot read the .npy header (descr, fortran_order or shape is missing)");
  CHECK(!load_tensor_file(dir.path + "/missing.npy", "A", DType::f32, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, "cannot read " + dir.path + "/missing.npy: No such file or directory");
  CHECK(!load_tensor_file(dir.path + "/a.txt", "A", DType::f32, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, "unknown file type for tensor A (f32 [2, 3]); use .npy, or .bin");

  // .bin: raw elements, exactly numel * bytes.
  const std::string bin = dir.file("a.bin");
  write_text(bin, std::string(reinterpret_cast<const char*>(column_major), 24));
  CHECK(load_tensor_file(bin, "A", DType::f32, 2, shape23, &loaded, &error) && decode(DType::f32, loaded.data(), 1) == 4.0f);
  CHECK(!load_tensor_file(bin, "A", DType::f16, 2, shape23, &loaded, &error));
  CHECK_CONTAINS(error, bin + " has 24 bytes; tensor A (f16 [2, 3]) needs exactly 12 (6 elements x 2 bytes)");
}

// ------------------------------------------------------------------ tensors

void test_tensors(ScratchDir& dir) {
  std::string error;
  Tensor row = make_tensor("A", DType::bf16, {3, 4});
  Tensor col = make_tensor("A", DType::bf16, {3, 4}, {1, 3});
  Tensor padded = make_tensor("A", DType::bf16, {3, 4}, {6, 1});
  CHECK_EQ(row.numel(), int64_t(12));
  CHECK_EQ(col.storage_elements(), int64_t(12));
  CHECK_EQ(padded.storage_elements(), int64_t(16));
  CHECK_EQ(padded.storage_bytes(), size_t(32));
  const int64_t index[2] = {2, 1};
  CHECK_EQ(col.offset(index), int64_t(5));
  CHECK_EQ(padded.offset(index), int64_t(13));
  CHECK_EQ(col.logical_offset(9), int64_t(5));
  CHECK_EQ(make_tensor("E", DType::f32, {0, 4}).storage_elements(), int64_t(0));
  // The same logical values whatever the layout; padding is zero.
  CHECK(fill_host(row, "", &error) && fill_host(col, "", &error) && fill_host(padded, "", &error));
  bool same = true;
  for (int64_t i = 0; i < 12; ++i) same = same && same_bits(get_logical(row, i), get_logical(col, i)) &&
                                           same_bits(get_logical(row, i), get_logical(padded, i));
  CHECK(same);
  CHECK(get_logical(row, 0) != get_logical(row, 1));
  CHECK(decode(DType::bf16, padded.host.data(), 4) == 0.0 && decode(DType::bf16, padded.host.data(), 11) == 0.0);
  // Outputs are poison everywhere, padding included.
  Tensor out = make_tensor("D", DType::f32, {2, 3}, {4, 1}, true);
  CHECK(fill_host(out, "", &error));
  bool poisoned = out.host.size() == 7 * 4;  // 1 * 4 + 2 + 1 elements
  for (int64_t e = 0; e < out.storage_elements(); ++e) poisoned = poisoned && is_poison(DType::f32, out.host.data(), e);
  CHECK(poisoned);
  // File inits: relative to base_dir; a col_major tensor still reads the file as logical order.
  const int64_t shape[2] = {3, 4};
  std::string written = dir.file("a_rowmajor.npy");
  CHECK(write_npy(written, col, col.host.data(), &error));
  Tensor from_file = make_tensor("A", DType::bf16, {3, 4}, {1, 3});
  from_file.init = init_of("file:a_rowmajor.npy");
  CHECK(fill_host(from_file, dir.path, &error));
  CHECK(from_file.host == col.host);
  Tensor absolute = make_tensor("A", DType::bf16, {3, 4});
  absolute.init = init_of("file:" + written);
  CHECK(fill_host(absolute, "/nonexistent", &error) && absolute.host == row.host);
  std::vector<unsigned char> logical;
  CHECK(load_tensor_file(written, "A", DType::bf16, 2, shape, &logical, &error) && logical == row.host);
  Tensor missing = make_tensor("A", DType::bf16, {3, 4});
  missing.init = init_of("file:nope.npy");
  CHECK(!fill_host(missing, dir.path, &error));
  CHECK_CONTAINS(error, dir.path + "/nope.npy");
  // Different names with the same seed differ.
  Tensor other = make_tensor("B", DType::bf16, {3, 4});
  CHECK(fill_host(other, "", &error) && other.host != row.host);
}
