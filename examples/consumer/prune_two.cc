// headprune as a library: load a checkpoint, remove heads, save the smaller model.
//   prune_two CHECKPOINT OUT TYPE:LAYER:HEAD[,TYPE:LAYER:HEAD...]
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <headprune/config.h>
#include <headprune/io/checkpoint.h>
#include <headprune/model/remove_heads.h>
#include <headprune/version.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " CHECKPOINT OUT TYPE:LAYER:HEAD[,TYPE:LAYER:HEAD...]\n";
    return 2;
  }
  try {
    hp::Transformer model = hp::load_checkpoint(argv[1]);
    std::vector<hp::HeadId> heads;
    std::stringstream list(argv[3]);
    for (std::string h; std::getline(list, h, ',');) heads.push_back(hp::parse_head_id(h));
    hp::validate_heads(model->config(), heads);  // a head that does not exist, or every head of the model
    const int64_t before = model->n_active_heads(), params = model->n_parameters();
    hp::Transformer pruned = hp::remove_heads(*model, heads);
    hp::save_checkpoint(argv[2], *pruned);
    std::cout << "headprune " << HP_VERSION_STRING << ": " << before << " -> " << pruned->n_active_heads()
              << " heads, " << params << " -> " << pruned->n_parameters() << " parameters; saved " << argv[2] << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
